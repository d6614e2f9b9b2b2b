import { randomBytes } from 'node:crypto'
import { ApiError } from '../errors.js'
import type { WebhookPingResult } from '../schemas/webhook-endpoint.js'
import type { WebhooksRepository } from '../store/webhooks.js'
import type { DeliveryRequest, DeliveryResult } from './delivery.js'
import { traceDelivery } from './delivery-span.js'
import { deliveryHeaders } from './signing.js'

/** The type of a test delivery: not an order event, never in the feed. */
const PING_TYPE = 'webhook.ping'

/** Sends one delivery: Deliverer's `deliver` (the URL policy at connection, its timeout, the 64 KB cap, no redirects). */
export type Deliver = (request: DeliveryRequest, signal?: AbortSignal) => Promise<DeliveryResult>

/** How a ping went, as an attempt records it: the status when a response came, a short error when no 2xx came. */
export interface PingResult {
  status: number | null
  error: string | null
  durationMs: number
}

/** The body of a ping: Standard Webhooks' payload, its data the endpoint's id (a string: exact at any size). */
function pingBody(endpointId: bigint, now: Date): string {
  return `{"type":"${PING_TYPE}","timestamp":"${now.toISOString()}","data":{"endpointId":"${endpointId}"}}`
}

/**
 * How long a ping's claim outlives its delivery's timeout: the claim's own round trip and a late
 * timer. A ping ends within its timeout, so only an instance that died leaves a claim to expire.
 */
export const PING_CLAIM_MARGIN_MS = 1000

/**
 * Sends the endpoint one `webhook.ping` now, for the API and the CLI alike: to its URL and signed
 * with its secrets as they are at this moment (the previous one too, within its 24 hours), its own
 * `webhook-id`, whether the endpoint is enabled or not. Outside the feed, it changes nothing: not the
 * position, not the status (a 410 disables nothing), not the attempts, not the delivery metrics; it
 * may arrive while a feed delivery to the endpoint is in flight. Undefined: no such endpoint.
 *
 * At most one ping per endpoint is in flight, across every instance and the CLI: it is claimed in
 * the database (its `webhook-id` the claim's token) until `timeoutMs` (the delivery's own) and
 * PING_CLAIM_MARGIN_MS from the claim, and released once answered. Another ping meanwhile throws
 * 409 `ping_in_flight`, at once: it does not wait for the first, whose answer is not its own.
 */
export async function pingWebhookEndpoint(
  webhooks: WebhooksRepository,
  deliver: Deliver,
  id: bigint,
  { timeoutMs, now = new Date(), signal }: { timeoutMs: number; now?: Date; signal?: AbortSignal },
): Promise<PingResult | undefined> {
  const endpoint = await webhooks.find(id)
  if (endpoint === undefined) return undefined
  const secrets = await webhooks.signingSecrets(id, now)
  if (secrets === undefined) return undefined // deleted meanwhile
  const body = pingBody(id, now)
  // 96 random bits, in a form no feed event's id (decimal) can take.
  const webhookId = `ping_${randomBytes(12).toString('hex')}`
  const signed = deliveryHeaders(secrets, webhookId, body, now)
  // Claimed last, just before the delivery starts its timeout, so the claim covers all of it.
  const claimedAt = new Date()
  const claim = await webhooks.claimPing(id, webhookId, claimedAt, new Date(claimedAt.getTime() + timeoutMs + PING_CLAIM_MARGIN_MS))
  if (claim === undefined) return undefined // deleted meanwhile
  if (claim === 'in_flight') throw new ApiError('ping_in_flight') // another request's, on any instance
  try {
    const { result } = await traceDelivery({ name: 'webhook ping', url: endpoint.url, endpointId: id, eventId: webhookId }, (traceHeaders) =>
      deliver({ url: endpoint.url, body, headers: { ...signed, ...traceHeaders } }, signal),
    )
    return { status: result.status, error: result.error, durationMs: result.durationMs }
  } finally {
    // A release that fails (the database gone) leaves the claim to expire at its time.
    await webhooks.releasePing(id, webhookId).catch(() => {})
  }
}

/** How a delivery went (a ping's, an attempt's) as the API shows it: unknown values omitted, never null. */
export function toApiPingResult(result: PingResult): WebhookPingResult {
  const shown: WebhookPingResult = { durationMs: result.durationMs }
  if (result.status !== null) shown.status = result.status
  if (result.error !== null) shown.error = result.error
  return shown
}
