import type { OrderStatus } from './orders.js'

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
