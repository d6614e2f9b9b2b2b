import { EventsExpiredError, ORDER_EVENT_TYPES, UnknownEventPositionError, type OrderEventType } from './order-events.js'
import type { FeedEvent, NextEvents, WebhookEndpointPatch } from './webhooks.js'

/**
 * The attempts shown per endpoint. Older ones are deleted in batches, not one per delivery: an
 * advance deletes them when it moves the position past a multiple of ATTEMPTS_KEPT (so after at
 * most that many attempts), a failure every time; an endpoint stores fewer than 2 × ATTEMPTS_KEPT.
 */
export const ATTEMPTS_KEPT = 100

/** Whether an advance from `from` to `to` deletes the endpoint's older attempts (see ATTEMPTS_KEPT). */
export function trimsAttempts(from: bigint, to: bigint): boolean {
  return from / BigInt(ATTEMPTS_KEPT) !== to / BigInt(ATTEMPTS_KEPT)
}

/**
 * How many events one `next` looks at, at most, whatever their types: an endpoint of a rare type
 * then moves through a long run of others in bounded steps, each a short read.
 */
export const NEXT_SCAN = 1000

/** The types as an endpoint keeps them: each once, in ORDER_EVENT_TYPES order. */
export function canonicalTypes(types: readonly OrderEventType[]): OrderEventType[] {
  return ORDER_EVENT_TYPES.filter((type) => types.includes(type))
}

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
  if (summary.pruned_through !== null && summary.pruned_through > after) return 'expired'
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

/** The feed's rules for a replay's `after`, as `events.read` applies them to a cursor. */
export function checkReplayPosition(after: bigint, prunedThrough: bigint, newest: bigint | null): void {
  const head = newest !== null && newest > prunedThrough ? newest : prunedThrough
  if (after < prunedThrough) throw new EventsExpiredError(prunedThrough)
  if (after > head) throw new UnknownEventPositionError()
}

/**
 * Whether a patch changes what the endpoint's deliveries are (where, which events, whether at all):
 * its revision moves, so that a dispatcher delivering to it stops after the delivery in flight and
 * leases it anew (a description alone changes no delivery).
 */
export function changesDeliveries(patch: WebhookEndpointPatch): boolean {
  return patch.url !== undefined || patch.eventTypes !== undefined || patch.enabled !== undefined
}
