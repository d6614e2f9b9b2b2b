import type { OrderStatus } from './orders.js'

/** The most `metadata[KEY]=VALUE` pairs one list takes (each key once). */
export const MAX_METADATA_FILTERS = 3

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
  /**
   * Only orders whose metadata has each of these keys with exactly its value: 1 to
   * MAX_METADATA_FILTERS keys (order-metadata.ts's rules), in key order.
   */
  metadata?: ReadonlyMap<string, string>
}

/**
 * The filters as one canonical text, for what must tell filters apart (the cursor's digest): every
 * key given, sorted, with its value normalised — an int64 as a decimal string, a list as a sorted set,
 * a map as its [key, value] pairs sorted by key — and keys left undefined omitted. Whatever key
 * OrderFilters gains is in it with no change here.
 */
export function canonicalFilters(filters: OrderFilters): string {
  const normal = (value: unknown): unknown =>
    typeof value === 'bigint'
      ? value.toString()
      : Array.isArray(value)
        ? [...new Set(value.map((v) => String(normal(v))))].sort()
        : value instanceof Map
          ? [...(value as ReadonlyMap<string, unknown>)].sort(([a], [b]) => byText(a, b)).map(([key, v]) => [key, normal(v)])
          : value
  const entries = Object.entries(filters)
    .filter(([, value]) => value !== undefined)
    .sort(([a], [b]) => byText(a, b))
  return JSON.stringify(entries.map(([key, value]) => [key, normal(value)]))
}

/** Code unit order, the same everywhere (no locale). */
function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** The metadata pairs of a filter in their canonical order: by key. */
export function metadataFilter(pairs: Iterable<readonly [string, string]>): ReadonlyMap<string, string> {
  return new Map([...pairs].sort(([a], [b]) => byText(a, b)))
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
