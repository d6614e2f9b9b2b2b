/**
 * A receiver of Petstore Orders webhooks, in Fastify (docs/webhooks.md): it verifies each delivery's
 * signature on the raw body with the `standardwebhooks` package, answers 2xx quickly, and handles
 * each event once however often it is delivered, by its `webhook-id`.
 * test/webhook-receiver-example.test.ts runs this file against real deliveries.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import { isInteger, parse } from 'lossless-json'
import { Webhook, WebhookVerificationError } from 'standardwebhooks'

/** A delivery's body: the event as the feed shows it; integers are bigints, ids exact however large. */
export interface Delivery {
  type: string
  timestamp: string
  data: { id: string; type: string; occurredAt: string; order: { id: bigint; status: string } & Record<string, unknown> }
}

/** JSON with every integer a bigint: an int64 id past 2^53 is not rounded as JSON.parse would. */
function parseDelivery(body: Buffer): Delivery {
  return parse(body.toString('utf8'), null, (text) => (isInteger(text) ? BigInt(text) : Number(text))) as Delivery
}

export interface ReceiverOptions {
  /** The endpoint's secret, `whsec_…`, from createWebhookEndpoint (or rotateWebhookSecret). */
  secret: string
  /** Does the work for one event. Throwing makes the answer a 500: the event is delivered again later. */
  handle(delivery: Delivery): Promise<void>
  /**
   * The webhook-ids handled already. In production keep them where the work's results are, in the
   * same transaction; events arrive in feed order, so the highest id handled is often enough.
   */
  handled?: Set<string>
}

export function webhookReceiver({ secret, handle, handled = new Set() }: ReceiverOptions): FastifyInstance {
  const app = Fastify()
  const webhook = new Webhook(secret)

  app.register(async (hooks) => {
    // The signature is over the exact bytes sent: keep them, in this route's scope only.
    hooks.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body))

    hooks.post('/webhooks/petstore', async (request, reply) => {
      const headers = {
        'webhook-id': String(request.headers['webhook-id'] ?? ''),
        'webhook-timestamp': String(request.headers['webhook-timestamp'] ?? ''),
        'webhook-signature': String(request.headers['webhook-signature'] ?? ''),
      }
      try {
        // Checks the signature (any of the entries: two during a rotation) and that the timestamp is within 5 minutes.
        webhook.verify(request.body as Buffer, headers, { jsonParse: false })
      } catch (error) {
        if (error instanceof WebhookVerificationError) return reply.code(401).send()
        throw error
      }
      const id = headers['webhook-id']
      if (id.startsWith('ping_')) return reply.code(204).send() // a test delivery (pingWebhookEndpoint): no event in it
      if (handled.has(id)) return reply.code(204).send() // delivered again (a retry, or a replay): done already
      await handle(parseDelivery(request.body as Buffer))
      handled.add(id)
      return reply.code(204).send()
    })
  })
  return app
}
