// The v2 list's filters, and the query string of a page.
import type { OrderStatus } from './api-types.js'
import type { operations as operationsV2 } from './openapi-v2-types.js'
import { instant, int64Text } from './request-values.js'
import type { RequestOptions } from './transport.js'

/** The filters of the v2 list; every one given must match. By default, the orders not cancelled. */
export interface OrderFilters {
  /** The statuses to include (default `['pending', 'shipped']`). */
  status?: readonly OrderStatus[]
  /** Only this pet's orders: a bigint or its decimal string. */
  petId?: bigint | string
  /** Only fulfilled (`true`) or unfulfilled (`false`) orders. */
  complete?: boolean
  /** Only orders shipping at or after this instant (a Date or an RFC 3339 date-time). */
  shipDateFrom?: Date | string
  /** Only orders shipping before this instant, which must be later than `shipDateFrom`. */
  shipDateTo?: Date | string
  /** Only orders whose metadata has each of these keys with exactly this value (up to 3): `metadata[KEY]=VALUE`. */
  metadata?: Readonly<Record<string, string>>
}

export interface PageOptions extends OrderFilters, RequestOptions {
  /** How many orders the page holds at most, 1–1000 (the server's default is 100). */
  limit?: number
  /** The `nextCursor` of the previous page, fetched with the same filters. */
  cursor?: string
}

type ListOrdersQuery = NonNullable<operationsV2['listOrders']['parameters']['query']>

/** `?limit=…&status=…`, from the options given; their values checked only where a mistake would be silent. */
export function queryString(options: Omit<PageOptions, 'signal'>): string {
  const query: { [K in Exclude<keyof ListOrdersQuery, 'metadata'>]?: string } = {}
  if (options.limit !== undefined) query.limit = String(options.limit)
  if (options.cursor !== undefined) query.cursor = options.cursor
  if (options.status !== undefined) {
    if (!Array.isArray(options.status)) throw new TypeError('status: an array of statuses, e.g. [\'pending\']')
    query.status = options.status.join(',')
  }
  if (options.petId !== undefined) query.petId = int64Text(options.petId, 'petId')
  if (options.complete !== undefined) query.complete = String(options.complete)
  if (options.shipDateFrom !== undefined) query.shipDateFrom = instant(options.shipDateFrom)
  if (options.shipDateTo !== undefined) query.shipDateTo = instant(options.shipDateTo)
  const params = new URLSearchParams(query as Record<string, string>)
  if (options.metadata !== undefined) {
    if (typeof options.metadata !== 'object' || options.metadata === null) throw new TypeError('metadata: an object of keys and values, e.g. { customer: \'c-1042\' }')
    // OpenAPI's deepObject: one parameter per key; every key's own property, `__proto__` too.
    for (const [key, value] of Object.entries(options.metadata)) params.append(`metadata[${key}]`, value)
  }
  const text = params.toString()
  return text === '' ? '' : `?${text}`
}
