/**
 * The order event feed's side of a store (docs/order-events.md): a transactional outbox.
 *
 * Every change to an order writes its event in the change's own transaction (import, ship, the v1
 * and v2 cancels, also inside a group-commit batch), so there is no event without its change and no
 * change without its event. An event's position is an int64 given out in commit order: every
 * transaction that writes events first bumps `data_version`, whose row lock it then holds until
 * COMMIT, and only then takes positions. So positions become visible in ascending order, and a
 * reader that resumes after the last position it saw can never pass one that commits later
 * (docs/decisions.md, "Event positions in commit order").
 *
 * Every transaction that writes events also bumps the data version, so a change of
 * `orders.dataVersion()` is the signal to read the feed again (the long poll's wakeup).
 */
export const ORDER_EVENT_TYPES = ['order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled'] as const
export type OrderEventType = (typeof ORDER_EVENT_TYPES)[number]

/** One page of the feed, as the OrderEvent schema's serializer writes it. */
export interface OrderEventsPage {
  /**
   * The events as a JSON array, UTF-8: each `{"id":"<position>","type":…,"occurredAt":…,"order":{…}}`,
   * the order as v2 shows it right after the change (field order of the OrderV2 serializer).
   */
  json: Buffer
  /** How many events the page holds. */
  count: number
  /**
   * Where to resume: the page's last position; for an empty page, `after` when one was given, else
   * the latest position given out so far (every later event is after it).
   */
  next: bigint
}

export interface OrderEventsRepository {
  /**
   * At most `limit` events after position `after` (exclusive; undefined: from the oldest retained
   * event), in ascending position. Throws EventsExpiredError when events after `after` have been
   * pruned, and UnknownEventPositionError when `after` is past every position given out.
   */
  read(after: bigint | undefined, limit: number): Promise<OrderEventsPage>
  /**
   * Deletes the oldest events that occurred before `before`, at most `batch` of them, in one short
   * transaction that never waits for a writer; oldest position first and never past an event it
   * keeps, so what is retained is always everything after one position. Returns how many it deleted.
   */
  prune(before: Date, batch?: number): Promise<number>
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

/** What a store's one read of the feed found, before the rules every store applies (`toEventsPage`). */
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

/** The feed's rules on one consistent read: 410 before what is retained, 400 past the end. */
export function toEventsPage(after: bigint | undefined, read: EventsRead): OrderEventsPage {
  const head = read.newest !== null && read.newest > read.prunedThrough ? read.newest : read.prunedThrough
  if (after !== undefined) {
    if (after < read.prunedThrough) throw new EventsExpiredError(read.prunedThrough)
    if (after > head) throw new UnknownEventPositionError()
  }
  return { json: read.json, count: read.count, next: read.last ?? after ?? head }
}

/** An event's JSON after its `"id":"…",`, the part stored with it: `"type":…,"occurredAt":…,"order":{…}}`. */
export function eventBody(type: OrderEventType, occurredAt: string, orderJson: string): string {
  return `"type":"${type}","occurredAt":"${occurredAt}","order":${orderJson}}`
}
