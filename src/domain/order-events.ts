/**
 * The order event feed's rules (docs/order-events.md), for both stores, the API and the CLI: its
 * event types, what a position is, and how a cursor is judged against what retention kept.
 */
import { INT64_MAX } from './int64.js'

export const ORDER_EVENT_TYPES = ['order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled'] as const
export type OrderEventType = (typeof ORDER_EVENT_TYPES)[number]

/** Event types as kept: each once, in ORDER_EVENT_TYPES order; none given means every type. */
export function canonicalEventTypes(types: readonly OrderEventType[] | undefined): OrderEventType[] {
  if (types === undefined) return [...ORDER_EVENT_TYPES]
  return ORDER_EVENT_TYPES.filter((type) => types.includes(type))
}

/** A position as the feed writes it (an event's id, a nextCursor): decimal, no sign, no leading zero. */
export const EVENT_POSITION_PATTERN = '^(0|[1-9][0-9]{0,18})$'
const POSITION = new RegExp(EVENT_POSITION_PATTERN)

/** Text that is not a position this feed could have written. */
class InvalidEventPositionError extends Error {
  constructor(readonly text: string) {
    super('not a position of the event feed (an event id or a nextCursor)')
    this.name = 'InvalidEventPositionError'
  }
}

/** A cursor of the feed (an event's id, a nextCursor), exact; anything else throws InvalidEventPositionError. */
export function parseEventPosition(text: string): bigint {
  const position = POSITION.test(text) ? BigInt(text) : undefined
  if (position === undefined || position > INT64_MAX) throw new InvalidEventPositionError(text)
  return position
}

/** One page of the feed, as the OrderEvent schema's serializer writes it. */
export interface OrderEventsPage {
  /**
   * The events as a JSON array, UTF-8: each `{"id":"<position>","type":…,"occurredAt":…,"order":{…}}`,
   * the order as v2 shows it right after the change (field order of the OrderV2 serializer).
   */
  json: Buffer
  count: number
  /**
   * Where to resume: the page's last position; for an empty page, `after` when one was given, else
   * the latest position given out so far (every later event is after it).
   */
  next: bigint
}

/** `after` precedes events that retention has deleted: the API answers 410 events_expired. */
export class EventsExpiredError extends Error {
  /** `prunedThrough`: the newest position retention has deleted; resuming from it or later is fine. */
  constructor(readonly prunedThrough: bigint) {
    super('events after this cursor have been deleted by retention')
    this.name = 'EventsExpiredError'
  }
}

/** `after` is past every position this database has given out: not a cursor of this feed. */
export class UnknownEventPositionError extends Error {
  constructor() {
    super('the cursor is past the end of the feed')
    this.name = 'UnknownEventPositionError'
  }
}

/** Whether events after `after` have been deleted: retention deleted every position through `prunedThrough`. */
export function eventsExpired(after: bigint, prunedThrough: bigint): boolean {
  return after < prunedThrough
}

/**
 * The feed's bounds on a cursor, read in one snapshot: `after` may be anything from what retention
 * deleted last (410 before it) to the newest position given out (400 past it). Returns that head.
 */
export function checkCursor(after: bigint | undefined, prunedThrough: bigint, newest: bigint | null): bigint {
  const head = newest !== null && newest > prunedThrough ? newest : prunedThrough
  if (after !== undefined) {
    if (eventsExpired(after, prunedThrough)) throw new EventsExpiredError(prunedThrough)
    if (after > head) throw new UnknownEventPositionError()
  }
  return head
}

/** What a store's one read of the feed found, before the feed's rules (`toEventsPage`). */
export interface EventsRead {
  json: Buffer
  count: number
  /** The page's last position; null for an empty page. */
  last: bigint | null
  /** The newest position retention has deleted (0: none). */
  prunedThrough: bigint
  /** The newest position committed (null: none retained). */
  newest: bigint | null
}

/** The page of one consistent read, `after` judged by checkCursor. */
export function toEventsPage(after: bigint | undefined, read: EventsRead): OrderEventsPage {
  const head = checkCursor(after, read.prunedThrough, read.newest)
  return { json: read.json, count: read.count, next: read.last ?? after ?? head }
}

/**
 * An event's JSON after its `"id":"…",`, the part stored with it: `"type":…,"occurredAt":…,"order":{…}}`,
 * and an update's `"previous":{…}` last (order-patch.ts's previousJson).
 */
export function eventBody(type: OrderEventType, occurredAt: string, orderJson: string, previousJson?: string): string {
  return `"type":"${type}","occurredAt":"${occurredAt}","order":${orderJson}${previousJson === undefined ? '' : `,"previous":${previousJson}`}}`
}
