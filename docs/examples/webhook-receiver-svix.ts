/**
 * A receiver of Petstore Orders webhooks verified with the `svix` package (docs/webhooks.md), in
 * plain node:http. svix's `Webhook.verify` returns `JSON.parse(body)`, which rounds an int64 id past
 * 2^53 (9007199254740993 becomes 9007199254740992): its result is not used, and the verified body
 * is parsed again with lossless-json, every integer a bigint.
 * test/webhook-receiver-example.test.ts runs this file against a real delivery.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { isInteger, parse } from 'lossless-json'
import { Webhook, WebhookVerificationError } from 'svix'

/** A delivery's body: the event as the feed shows it; integers are bigints, ids exact however large. */
export interface SvixDelivery {
  type: string
  timestamp: string
  data: { id: string; type: string; occurredAt: string; order: { id: bigint; status: string } & Record<string, unknown> }
}

/** Does the work for one event; throwing makes the answer a 500, and the event is delivered again later. */
export type Handle = (delivery: SvixDelivery, webhookId: string) => Promise<void>

export function svixReceiver(secret: string, handle: Handle): Server {
  const webhook = new Webhook(secret)
  return createServer((request, response) => {
    void receive(request).then(
      (status) => response.writeHead(status).end(),
      () => response.writeHead(500).end(),
    )
  })

  async function receive(request: IncomingMessage): Promise<number> {
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks) // the exact bytes signed
    const headers = {
      'webhook-id': String(request.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(request.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(request.headers['webhook-signature'] ?? ''),
    }
    try {
      webhook.verify(body, headers) // its result, JSON.parse(body), may hold rounded ids: not used
    } catch (error) {
      if (error instanceof WebhookVerificationError) return 401
      throw error
    }
    if (headers['webhook-id'].startsWith('ping_')) return 204 // a test delivery (pingWebhookEndpoint): no event in it
    const delivery = parse(body.toString('utf8'), null, (text) => (isInteger(text) ? BigInt(text) : Number(text))) as SvixDelivery
    await handle(delivery, headers['webhook-id']) // once per webhook-id: see "Order, at least once"
    return 204
  }
}
