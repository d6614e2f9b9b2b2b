import { eventsExpired, type OrderEventType } from '../domain/order-events.js'
import {
  signingSecretsAt,
  type DeliveryEvent,
  type NextEvents,
  type WebhookAttempt,
  type WebhookDisabledReason,
  type WebhookEndpoint,
  type WebhookLease,
} from '../domain/webhooks.js'

/**
 * A row of webhook_endpoints without its secrets, instants as toISOString() text. SQLite's types
 * first: the event types comma-joined, `enabled` 0n or 1n.
 */
export interface EndpointRow {
  id: bigint
  url: string
  event_types: string | OrderEventType[]
  description: string | null
  enabled: bigint | boolean
  disabled_reason: WebhookDisabledReason | null
  position: bigint
  failing_since: string | null
  next_attempt_at: string | null
  created_at: string
}

export function toEndpoint(row: EndpointRow): WebhookEndpoint {
  const types = row.event_types
  return {
    id: row.id,
    url: row.url,
    eventTypes: typeof types === 'string' ? ((types === '' ? [] : types.split(',')) as OrderEventType[]) : types,
    description: row.description,
    enabled: Boolean(row.enabled),
    disabledReason: row.disabled_reason,
    position: row.position,
    failingSince: row.failing_since,
    nextAttemptAt: row.next_attempt_at,
    createdAt: row.created_at,
  }
}

/**
 * The head of the feed, in SQL, for the statements that read it with their write (a new endpoint's
 * position, which endpoints are behind it, their lag): the newest position given out, the newest
 * event retained or the newest retention deleted. `greatest`: the dialect's two-argument maximum.
 */
export function feedHead(greatest: 'max' | 'greatest'): string {
  return `${greatest}(coalesce((SELECT max(position) FROM order_events), 0), (SELECT pruned_through FROM event_retention WHERE id = 1))`
}

/** A row of webhook_attempts. */
export interface AttemptRow {
  event_position: bigint
  attempted_at: string
  status: bigint | number | null
  error: string | null
  duration_ms: bigint | number
}

export function toAttempt(row: AttemptRow): WebhookAttempt {
  return {
    eventId: row.event_position,
    attemptedAt: row.attempted_at,
    status: row.status === null ? null : Number(row.status),
    error: row.error,
    durationMs: Number(row.duration_ms),
  }
}

/**
 * How many events one `next` looks at, at most, whatever their types: an endpoint of a rare type
 * then moves through a long run of others in bounded steps, each a short read.
 */
export const NEXT_SCAN = 1000

/**
 * A row of a store's `next` statement: one summary row (type null) with the retention bound and the
 * last position scanned, and one row per matching event, with its write's trace context (NULL: none).
 */
export interface NextRow {
  position: bigint | null
  type: OrderEventType | null
  occurred_at: string | null
  body: string | null
  traceparent: string | null
  tracestate: string | null
  pruned_through: bigint | null
  scanned_through: bigint | null
}

/** `next`'s answer from its one read: 'expired' before retention, else the events and how far it read. */
export function toNextEvents(after: bigint, limit: number, rows: readonly NextRow[]): NextEvents {
  const summary = rows.find((row) => row.type === null)
  if (summary === undefined) throw new Error('the next-events read returned no summary row')
  if (summary.pruned_through !== null && eventsExpired(after, summary.pruned_through)) return 'expired'
  const events: DeliveryEvent[] = []
  for (const row of rows) {
    if (row.type === null) continue
    const position = row.position!
    const event: DeliveryEvent = { position, type: row.type, occurredAt: row.occurred_at!, json: `{"id":"${position}",${row.body!}` }
    const { traceparent, tracestate } = row
    if (traceparent !== null) event.trace = tracestate === null ? { traceparent } : { traceparent, tracestate }
    events.push(event)
  }
  // A full page stops at its last event (those after it may match too); otherwise every event
  // scanned was looked at, matching or not.
  const through = events.length === limit ? events.at(-1)!.position : (summary.scanned_through ?? after)
  return { events, through }
}

/** A row of a store's lease statement: the endpoint's, and its lease's. */
export interface LeasedRow extends EndpointRow {
  id: bigint
  failures: number | bigint
  revision: number | bigint
  secret: string
  previous_secret: string | null
  previous_until: string | null
}

/**
 * A lease pass's leases from its rows, by endpoint id (the statement returns them in no order), each
 * held by `owner` until `until`, with the secrets that sign at `now`.
 */
export function toLeases(rows: LeasedRow[], owner: string, until: Date, now: Date): WebhookLease[] {
  return rows
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .map((row) => ({
      endpoint: toEndpoint(row),
      secrets: signingSecretsAt(row.secret, row.previous_secret, row.previous_until, now),
      owner,
      leaseUntil: until,
      failures: Number(row.failures),
      revision: Number(row.revision),
      changed: false,
    }))
}
