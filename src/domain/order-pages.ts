import type { OrderRecord, OrderStatus } from './orders.js'

/** Why an order was cancelled: the closed set both stores CHECK and v2 shows. */
export const CANCELLATION_REASONS = ['customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other'] as const
export type CancellationReason = (typeof CANCELLATION_REASONS)[number]

/** An order as v2 shows it: the stored order, and on a cancelled one when and why (null: not known). */
export interface OrderV2Record extends Omit<OrderRecord, 'cancelledAt' | 'cancellationReason'> {
  cancelledAt: string | null
  cancellationReason: CancellationReason | null
  /** When it was shipped through the API or the CLI (RFC 3339 UTC, milliseconds); null: not known (an import). */
  shippedAt: string | null
  /** When it was completed through the API or the CLI; null: not known or not complete. */
  completedAt: string | null
}

/** The filters of a v2 list. Every order of a page matches all of them. */
export interface OrderFilters {
  /** Non-empty, in ORDER_STATUSES order, no repeats. */
  statuses: OrderStatus[]
  petId?: bigint
  complete?: boolean
  /** Inclusive; an instant as `Date#toISOString()` writes it (so it compares as stored text too). */
  shipDateFrom?: string
  /** Exclusive; same form. */
  shipDateTo?: string
}

/**
 * The filters as one canonical text, for what must tell filters apart (the cursor's digest): every
 * key given, sorted, with its value normalised — an int64 as a decimal string, a list as a sorted set
 * — and keys left undefined omitted. Whatever key OrderFilters gains is in it with no change here.
 */
export function canonicalFilters(filters: OrderFilters): string {
  const normal = (value: unknown): unknown =>
    typeof value === 'bigint' ? value.toString() : Array.isArray(value) ? [...new Set(value.map((v) => String(normal(v))))].sort() : value
  const entries = Object.entries(filters)
    .filter(([, value]) => value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return JSON.stringify(entries.map(([key, value]) => [key, normal(value)]))
}

/** Whether the filters restrict nothing but the status: any other key given, whatever it is, is a filter. */
export function onlyStatusFilter(filters: OrderFilters): boolean {
  return Object.entries(filters).every(([key, value]) => key === 'statuses' || value === undefined)
}

/** One page: the orders matching `filters` with an id above `after`, ascending, at most `limit`. */
export interface OrderPageQuery {
  filters: OrderFilters
  after?: bigint
  limit: number
}
