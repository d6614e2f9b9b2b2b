import type { OrderEventsPage } from '../domain/order-events.js'

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
export interface OrderEventsRepository {
  /**
   * At most `limit` events after position `after` (exclusive; undefined: from the oldest retained
   * event), in ascending position. Throws EventsExpiredError when events after `after` have been
   * pruned, and UnknownEventPositionError when `after` is past every position given out
   * (domain/order-events.ts, checkCursor).
   */
  read(after: bigint | undefined, limit: number): Promise<OrderEventsPage>
  /**
   * Deletes the oldest events that occurred before `before`, at most `batch` of them, in one short
   * transaction that never waits for a writer; oldest position first and never past an event it
   * keeps, so what is retained is always everything after one position. Returns how many it deleted.
   */
  prune(before: Date, batch?: number): Promise<number>
}
