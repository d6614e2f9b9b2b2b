import { preconditionFailed, type CancelResult, type CompleteResult, type ExpectedVersion, type OrderV2Record, type ShipResult } from './orders.js'

/**
 * What one kind of conditional write to one order (cancel, ship, complete) answers, whichever store
 * runs it and however (on its own, or with others in one statement): the stores keep only the SQL.
 */
export interface OrderWriteRule<Result> {
  /** The write changed the order; `order` as the write left it. */
  changed(order: OrderV2Record): Result
  /**
   * The write's conditional update missed: the answer, from the order as it stands (undefined: no
   * such order) and the version the write required (If-Match). Undefined when the order can still
   * take the write: another transaction held its row or changed it after the update's snapshot
   * (never within one transaction), so it is written again (on its own, waiting for the lock).
   */
  missed(order: OrderV2Record | undefined, expected?: ExpectedVersion): Result | undefined
  /** What a later write of the same order in one batch gets, given the first one's answer. */
  repeated(first: Result): Result
}

const NOT_FOUND = { outcome: 'not_found' } as const
const CANCELLED = { outcome: 'cancelled' } as const

/** pending → cancelled. A cancelled order keeps its first cancellation, which later cancels are shown. */
export const CANCEL: OrderWriteRule<CancelResult> = {
  changed: (order) => ({ outcome: 'cancelled', order }),
  missed(order, expected) {
    if (order === undefined) return NOT_FOUND
    const failed = preconditionFailed(order, expected)
    if (failed !== undefined) return failed
    if (order.status === 'cancelled') return { outcome: 'already_cancelled', order }
    return order.status === 'shipped' ? { outcome: 'already_shipped' } : undefined
  },
  repeated: (first) => (first.outcome === 'cancelled' ? { outcome: 'already_cancelled', order: first.order } : first),
}

/** pending → shipped, once: a retry finds it shipped and changes nothing. */
export const SHIP: OrderWriteRule<ShipResult> = {
  changed: (order) => ({ outcome: 'shipped', order }),
  missed(order, expected) {
    if (order === undefined) return NOT_FOUND
    const failed = preconditionFailed(order, expected)
    if (failed !== undefined) return failed
    if (order.status === 'cancelled') return CANCELLED
    return order.status === 'shipped' ? { outcome: 'already_shipped', order } : undefined
  },
  repeated: (first) => (first.outcome === 'shipped' ? { outcome: 'already_shipped', order: first.order } : first),
}

/** shipped and not complete → complete, once. */
export const COMPLETE: OrderWriteRule<CompleteResult> = {
  changed: (order) => ({ outcome: 'completed', order }),
  missed(order, expected) {
    if (order === undefined) return NOT_FOUND
    const failed = preconditionFailed(order, expected)
    if (failed !== undefined) return failed
    if (order.status === 'cancelled') return CANCELLED
    if (order.status === 'pending') return { outcome: 'not_shipped' }
    return order.complete ? { outcome: 'already_complete', order } : undefined
  },
  repeated: (first) => (first.outcome === 'completed' ? { outcome: 'already_complete', order: first.order } : first),
}
