import { createHmac } from 'node:crypto'
import type { FeedEvent, WebhookSecrets } from '../domain/webhooks.js'

/**
 * Signatures by the Standard Webhooks spec (https://www.standardwebhooks.com/): `v1,` + base64 of
 * HMAC-SHA256 over `id.timestamp.body`, keyed by the bytes of the secret after `whsec_`. During
 * the 24 hours after a rotation the previous secret signs too, as a second space-separated entry,
 * so a receiver still holding the old secret keeps verifying while it changes over.
 */

const SECRET_PREFIX = 'whsec_'

/** The delivery body: Standard Webhooks' payload around the event exactly as the feed shows it. */
export function deliveryBody(event: FeedEvent): string {
  return `{"type":${JSON.stringify(event.type)},"timestamp":${JSON.stringify(event.occurredAt)},"data":${event.json}}`
}

/** One `v1,<base64>` signature of `id.timestamp.body` with `secret`. */
function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`
}

/** The `webhook-signature` header: the current secret's, then the previous one's while it still signs at `now`. */
function signatureHeader(secrets: WebhookSecrets, id: string, timestamp: number, body: string, now: Date): string {
  const signatures = [sign(secrets.current, id, timestamp, body)]
  if (secrets.previous !== null && secrets.previousUntil !== null && now.getTime() < Date.parse(secrets.previousUntil)) {
    signatures.push(sign(secrets.previous, id, timestamp, body))
  }
  return signatures.join(' ')
}

/**
 * The headers of a delivery of `body` at `now`, for a feed event and a ping alike: `webhookId` is an
 * event's position (the same on every retry), or a ping's own `ping_…` id.
 */
export function deliveryHeaders(secrets: WebhookSecrets, webhookId: string, body: string, now: Date): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000)
  return {
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(secrets, webhookId, timestamp, body, now),
  }
}
