import { eventsExpired, type OrderEventType } from '../domain/order-events.js'
import { signingSecretsAt, type FeedEvent, type NextEvents, type WebhookEndpoint, type WebhookLease } from '../domain/webhooks.js'

/**
 * How many events one `next` looks at, at most, whatever their types: an endpoint of a rare type
 * then moves through a long run of others in bounded steps, each a short read.
 */
export const NEXT_SCAN = 1000

/**
 * A row of a store's `next` statement: one summary row (type null) with the retention bound and the
 * last position scanned, and one row per matching event.
 */
export interface NextRow {
  position: bigint | null
  type: OrderEventType | null
  occurred_at: string | null
  body: string | null
  pruned_through: bigint | null
  scanned_through: bigint | null
}

/** `next`'s answer from its one read: 'expired' before retention, else the events and how far it read. */
export function toNextEvents(after: bigint, limit: number, rows: readonly NextRow[]): NextEvents {
  const summary = rows.find((row) => row.type === null)
  if (summary === undefined) throw new Error('the next-events read returned no summary row')
  if (summary.pruned_through !== null && eventsExpired(after, summary.pruned_through)) return 'expired'
  const events: FeedEvent[] = []
  for (const row of rows) {
    if (row.type === null) continue
    const position = row.position!
    events.push({ position, type: row.type, occurredAt: row.occurred_at!, json: `{"id":"${position}",${row.body!}` })
  }
  // A full page stops at its last event (those after it may match too); otherwise every event
  // scanned was looked at, matching or not.
  const through = events.length === limit ? events.at(-1)!.position : (summary.scanned_through ?? after)
  return { events, through }
}

/** The columns of a store's lease statement that both stores read alike (each adds its endpoint's). */
export interface LeasedRow {
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
export function toLeases<Row extends LeasedRow>(rows: Row[], toEndpoint: (row: Row) => WebhookEndpoint, owner: string, until: Date, now: Date): WebhookLease[] {
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
