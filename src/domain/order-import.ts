import { canMoveTo, ORDER_STATUSES, type CancellationReason, type OrderRecord, type OrderStatus } from './orders.js'

/**
 * What an import (OrdersRepository.import) makes of the orders it finds, for both stores: they keep
 * the SQL, the batches and the transaction; these rules decide what a record may change.
 */

/**
 * Every move of status an import may make, as [from, to] (canMoveTo: a status only moves forward,
 * and cancelled is final), for a store that must judge a record in SQL, under its row's lock.
 */
export const IMPORT_MOVES: readonly (readonly [OrderStatus, OrderStatus])[] = ORDER_STATUSES.flatMap((from) =>
  ORDER_STATUSES.filter((to) => canMoveTo(from, to)).map((to) => [from, to] as const),
)

/** The statuses whose orders keep their cancellation (time and reason) through an import: a cancelled order keeps its first. */
export const KEEPS_CANCELLATION: readonly OrderStatus[] = ['cancelled']

/** A cancelled order's time and reason as a store writes them; null for an order that is not cancelled. */
export interface Cancellation {
  cancelledAt: string | null
  cancellationReason: CancellationReason | null
}

/**
 * The cancellation `record` leaves its order with. `importTime` is the import's one time (its
 * transaction's, toISOString()'s form), which every cancelled record without its own cancelledAt
 * gets. `current`: the order as the store holds it, when it does; one whose status keeps its
 * cancellation keeps it, whatever the record says.
 */
export function importedCancellation(record: OrderRecord, importTime: string, current?: Cancellation & { status: OrderStatus }): Cancellation {
  if (record.status !== 'cancelled') return { cancelledAt: null, cancellationReason: null }
  if (current !== undefined && KEEPS_CANCELLATION.includes(current.status)) {
    return { cancelledAt: current.cancelledAt, cancellationReason: current.cancellationReason }
  }
  return { cancelledAt: record.cancelledAt ?? importTime, cancellationReason: record.cancellationReason ?? null }
}

/** Why an import stops at the record that would move order `id` from `current` to `wanted`: canMoveTo refuses it. */
export function importConflict(id: bigint, current: OrderStatus, wanted: OrderStatus): string {
  return `order ${id} is ${current} and cannot become ${wanted}`
}
