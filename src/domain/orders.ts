import type { Order } from '../schemas/order.js'
import type { CancellationReason, OrderV2Record } from './order-pages.js'

/** Stored order status. v1 does not expose it; listOrders returns every order that is not cancelled. */
export const ORDER_STATUSES = ['pending', 'shipped', 'cancelled'] as const
export type OrderStatus = (typeof ORDER_STATUSES)[number]

/** An order as the operator imports and the store keeps it: the API's Order plus its status. */
export interface OrderRecord {
  id: bigint
  petId: bigint | null
  quantity: number | null
  /** RFC 3339 in UTC, as `Date#toISOString()` writes it. */
  shipDate: string | null
  complete: boolean
  status: OrderStatus
  /** A cancelled order's cancellation time (RFC 3339 UTC, `toISOString()` form); absent: the import's time. */
  cancelledAt?: string
  /** A cancelled order's reason; absent: none. */
  cancellationReason?: CancellationReason
}

/**
 * What one cancel found. `cancelled`: this request changed the order. `already_cancelled`: it was
 * cancelled before (by another request, an import, or an earlier cancel of the same batch), and
 * keeps that first cancellation's time and reason. Either way `order` is the order as it now stands.
 */
export type CancelResult =
  | { outcome: 'cancelled'; order: OrderV2Record }
  | { outcome: 'already_cancelled'; order: OrderV2Record }
  | { outcome: 'already_shipped' }
  | { outcome: 'not_found' }
export type CancelOutcome = CancelResult['outcome']
export type ShipOutcome = 'shipped' | 'already_shipped' | 'cancelled' | 'not_found'

/** The state rule import and ship share: a status only moves forward, and cancelled is final. */
export function canMoveTo(from: OrderStatus, to: OrderStatus): boolean {
  return from === to || from === 'pending'
}

/** The API view of a stored row: unknown values are omitted, not null. */
export function toApiOrder(row: {
  id: bigint
  petId: bigint | null
  quantity: number | null
  shipDate: string | null
  complete: boolean
}): Order {
  const order: Order = { id: row.id }
  if (row.petId !== null) order.petId = row.petId
  if (row.quantity !== null) order.quantity = row.quantity
  if (row.shipDate !== null) order.shipDate = row.shipDate
  order.complete = row.complete
  return order
}
