import type { OrderEventType } from './order-events.js'
import {
  preconditionFailed,
  type CancelResult,
  type CompleteResult,
  type ExpectedVersion,
  type OrderStatus,
  type OrderV2Record,
  type PreconditionFailed,
  type ShipResult,
} from './orders.js'

/**
 * An order's state as a conditional write reads or sets it: its status, and whether it is complete
 * (only a shipped order can be). A field left out is neither required nor set.
 */
export interface OrderState {
  status?: OrderStatus
  complete?: boolean
}

/**
 * One kind of conditional write to one order (cancel, ship, complete): the state it changes an order
 * from and to, its event, and what it answers, whichever store runs it and however (on its own, or
 * with others in one statement). Each store renders `from` and `to` as its update's condition and
 * assignments (../store/order-state-sql.ts), and keeps only the columns that record the write's time
 * and who.
 */
export interface OrderWriteRule<Result> {
  /** The state an order must be in for the write to change it. */
  from: OrderState
  /** What the write sets. */
  to: OrderState
  /** The event a change records. */
  event: OrderEventType
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

/** Whether `order` is in `state`. */
export const isInState = (order: OrderV2Record, state: OrderState): boolean =>
  (state.status === undefined || order.status === state.status) && (state.complete === undefined || order.complete === state.complete)

const NOT_FOUND = { outcome: 'not_found' } as const
const CANCELLED = { outcome: 'cancelled' } as const

/**
 * A rule from its parts; `refused` answers for an order that exists, has the version required and
 * is not in `from`. Checked in that order: an unknown order is not found, a stale version is a
 * failed precondition whatever the state.
 */
function orderWrite<Result>(rule: {
  from: OrderState
  to: OrderState
  event: OrderEventType
  changed(order: OrderV2Record): Result
  refused(order: OrderV2Record): Result
  repeated(first: Result): Result
}): OrderWriteRule<Result | typeof NOT_FOUND | PreconditionFailed> {
  const { refused, ...rest } = rule
  return {
    ...rest,
    missed(order, expected) {
      if (order === undefined) return NOT_FOUND
      return preconditionFailed(order, expected) ?? (isInState(order, rule.from) ? undefined : refused(order))
    },
  }
}

/** pending → cancelled. A cancelled order keeps its first cancellation, which later cancels are shown. */
export const CANCEL: OrderWriteRule<CancelResult> = orderWrite<CancelResult>({
  from: { status: 'pending' },
  to: { status: 'cancelled' },
  event: 'order.cancelled',
  changed: (order) => ({ outcome: 'cancelled', order }),
  refused: (order) => (order.status === 'cancelled' ? { outcome: 'already_cancelled', order } : { outcome: 'already_shipped' }),
  repeated: (first) => (first.outcome === 'cancelled' ? { outcome: 'already_cancelled', order: first.order } : first),
})

/** pending → shipped, once: a retry finds it shipped and changes nothing. */
export const SHIP: OrderWriteRule<ShipResult> = orderWrite<ShipResult>({
  from: { status: 'pending' },
  to: { status: 'shipped' },
  event: 'order.shipped',
  changed: (order) => ({ outcome: 'shipped', order }),
  refused: (order) => (order.status === 'cancelled' ? CANCELLED : { outcome: 'already_shipped', order }),
  repeated: (first) => (first.outcome === 'shipped' ? { outcome: 'already_shipped', order: first.order } : first),
})

/** shipped and not complete → complete, once. */
export const COMPLETE: OrderWriteRule<CompleteResult> = orderWrite<CompleteResult>({
  from: { status: 'shipped', complete: false },
  to: { complete: true },
  event: 'order.completed',
  changed: (order) => ({ outcome: 'completed', order }),
  refused: (order) => (order.status === 'cancelled' ? CANCELLED : order.status === 'pending' ? { outcome: 'not_shipped' } : { outcome: 'already_complete', order }),
  repeated: (first) => (first.outcome === 'completed' ? { outcome: 'already_complete', order: first.order } : first),
})
