import { onlyStatusFilter, type OrderFilters, type OrderPageQuery } from '../domain/order-pages.js'
import type { OrderPageJson } from './store.js'

/** What differs between the stores' SQL for a page. */
export interface PageDialect {
  /** The select list, each column named as in the table (ship_date, cancelled_at as RFC 3339 text). */
  columns: string
  /** The order's v2 JSON text, as the OrderV2 schema's serializer writes it (see OrdersRepository.pageJson). */
  json: string
  /** The same text as pages read it, where the store has a cheaper way to it than `json`. */
  pageJson?: string
  /**
   * The statement aggregating `rows` (id, json, in id order) into one row: their JSON objects joined
   * by commas — a JSON array on SQLite (as bytes), without its brackets on PostgreSQL (see
   * readOrderPageJson) — and how many rows there are. `rows` ends in its own `ORDER BY id`, and the
   * aggregate reads it with nothing in between (no join): PostgreSQL's jsonPage relies on that order.
   */
  jsonPage(rows: string): string
  /** A boolean as a parameter's value (SQLite has no boolean type: 1 or 0). */
  bool(value: boolean): boolean | number
  /** The column, in a form no index serves (SQLite: `+column`), or the column where the planner needs no such help. */
  unindexed(column: string): string
  /** The table read through this index (SQLite: `orders INDEXED BY index`), or just the table. */
  through(index: string): string
}

const BY_ID = 'orders_status_complete_id' // (status, complete, id, ship_date)
const BY_PET = 'orders_pet_status_complete_id'
const BY_SHIP_DATE = 'orders_status_complete_ship_date'

/** A statement with named parameters (`@name`), and their values. */
export interface NamedStatement {
  sql: string
  params: Record<string, unknown>
}

/**
 * A branch with at least this many orders in a ship date range (after the keyset position) is read
 * in id order, one with fewer from that range and sorted. Each way then costs at most about
 * sqrt(limit × rows) index entries; 20 pages' worth keeps both around a millisecond at 1M orders.
 */
export function probeCap(limit: number): number {
  return Math.min(20 * limit, 20_000)
}

/**
 * A v2 page is read as one branch per (status, complete) pair the filters allow (only a shipped
 * order can be complete: a CHECK of both schemas), at most four. Each branch selects the ids
 * `… ORDER BY id LIMIT n` from an index whose equality prefix is that pair — (status, complete, id,
 * ship_date), or (pet_id, status, complete, id) with a petId — so it reads its entries already in id
 * order from the keyset position on and stops after n, without touching the table (the first index
 * also holds the ship date a branch tests). The branches are merged in id order and cut to n; only
 * then are the page's n rows read, by id. No page reads the table beyond its own rows.
 *
 * A ship date range breaks the "stops after n" part: in id order, a branch with few orders in the
 * range (none shipped tomorrow) would read all of its entries to find them, and planners, taking
 * status and date as independent, do choose that. So with a range (and no petId: a pet's branches
 * are small), each branch is first counted in its range of (status, complete, ship_date, id) up to
 * probeCap, by one index-only statement (`orderPageProbe`; its ORDER BY ship_date only that index
 * serves). An empty branch is left out; a sparse one is read from that range and sorted (at most
 * probeCap entries; `ORDER BY +id` keeps planners off the id order); a dense one in id order (SQLite
 * is told with `+ship_date`, else it sorts the whole range).
 *
 * A page of pending and shipped orders and no other filter is the exception: see isDense.
 *
 * SQLite is also told which index each branch reads (INDEXED BY): from its statistics it would
 * otherwise scan the table in rowid order for a frequent status, cheap only while that status stays
 * frequent. test/v2-order-plans.test.ts holds both stores' plans to their indexes.
 *
 * A page with a metadata filter is read from the metadata's own index instead: see metadataStatement.
 */
export function orderPageStatement(query: OrderPageQuery, dialect: PageDialect, counts?: number[]): NamedStatement | undefined {
  if (query.filters.metadata !== undefined) return metadataStatement(query, dialect, counts)
  if (isDense(query.filters)) return keysetStatement(query, dialect)
  const cap = probeCap(query.limit)
  const sparse = (i: number): boolean => (counts?.[i] ?? cap) < cap
  const { wheres, params } = branches(query, dialect, (i) => counts !== undefined && !sparse(i))
  const selects: string[] = []
  const byId = dialect.through(query.filters.petId === undefined ? BY_ID : BY_PET)
  wheres.forEach((where, i) => {
    if (counts?.[i] === 0) return
    const [from, order] = sparse(i) ? [dialect.through(BY_SHIP_DATE), '+id'] : [byId, 'id']
    selects.push(`SELECT id FROM ${from} WHERE ${where} ORDER BY ${order} LIMIT @limit`)
  })
  params.limit = query.limit
  if (selects.length === 0) return undefined
  // The ids first, from the indexes alone, then the page's rows by id.
  const ids = selects.length === 1 ? selects[0]! : `${selects.map((select, i) => `SELECT id FROM (${select}) AS b${i}`).join(' UNION ALL ')} ORDER BY id LIMIT @limit`
  return { sql: `SELECT ${dialect.columns} FROM orders WHERE id IN (${ids}) ORDER BY id`, params }
}

/**
 * Pending and shipped orders together, with no other filter (the default list; any other key of the
 * filters, even one added later, takes the branches: onlyStatusFilter), are nearly every order: only
 * cancelled ones are left out, a small share by nature. Such a page is read straight from the
 * primary key, `id > after ORDER BY id LIMIT n`, its rows with it: one read of n rows plus
 * the cancelled ones among them, where the branches would read n index entries per branch and then
 * each row by id again (twice the time of the whole page). The status is tested as v1's list does,
 * `status <> 'cancelled'`, which no index serves: with `status IN ('pending', 'shipped')` PostgreSQL,
 * before its first ANALYZE of a freshly imported table, took the status for rare and read every
 * such order from a status index to sort them (100 ms a page at 200,000 orders), and SQLite's own
 * statistics steer it the same way. The first page starts at the smallest int64 so that it too is a
 * search of the key. The price: a run of consecutive cancelled orders is read through, row by row,
 * by the page that crosses it, as v1's list reads it.
 */
function isDense(filters: OrderFilters): boolean {
  return onlyStatusFilter(filters) && filters.statuses.includes('pending') && filters.statuses.includes('shipped')
}

/**
 * A page as JSON text (OrdersRepository.pageJson). `read` asks for one order more than the page
 * holds (its counts from its own probe): the database joins every order read into one text, in id
 * order, and counts them; toPageJson then cuts off the extra order, which only tells that more
 * follow. Numbering the rows in the statement instead, to leave that order out of the aggregate,
 * costs a window over the page: as much as building the page's JSON on SQLite, a third of the
 * statement on PostgreSQL.
 */
export function orderPageJsonStatement(read: OrderPageQuery, dialect: PageDialect, counts?: number[]): NamedStatement | undefined {
  const page = orderPageStatement(read, { ...dialect, columns: `id, ${dialect.pageJson ?? dialect.json} AS json` }, counts)
  return page === undefined ? undefined : { sql: dialect.jsonPage(page.sql), params: page.params }
}

const OBJECT_START = Buffer.from('{"id":')
const COMMA = 0x2c
const CLOSING_BRACKET = 0x5d

/**
 * The page of `limit` orders from the JSON array of the `count` orders read (orderPageJsonStatement:
 * at most limit + 1, in id order). Every order's JSON starts with `{"id":`, which occurs nowhere else
 * in it (its other strings are statuses, reasons, instants and metadata, whose keys have no quote
 * and whose values' quotes are escaped), followed by the id and a comma. With
 * one order too many, the comma before the last `{"id":` becomes the array's `]`, in place; the
 * page's last id is read from its last order's text.
 */
export function toPageJson(array: Buffer, count: number, limit: number): OrderPageJson {
  if (count === 0) return { json: array, lastId: undefined, more: false }
  let json = array
  if (count > limit) {
    const extra = array.lastIndexOf(OBJECT_START)
    if (extra < 2 || array[extra - 1] !== COMMA) throw new Error('a page read is not a JSON array of orders')
    array[extra - 1] = CLOSING_BRACKET
    json = array.subarray(0, extra)
  }
  const id = json.lastIndexOf(OBJECT_START) + OBJECT_START.length
  return { json, lastId: BigInt(json.toString('latin1', id, json.indexOf(COMMA, id))), more: count > limit }
}

const MIN_INT64 = -(2n ** 63n)

function keysetStatement(query: OrderPageQuery, dialect: PageDialect): NamedStatement {
  const conditions = [`id ${query.after === undefined ? '>=' : '>'} @after`]
  if (!query.filters.statuses.includes('cancelled')) conditions.push(`status <> 'cancelled'`)
  return {
    sql: `SELECT ${dialect.columns} FROM orders WHERE ${conditions.join(' AND ')} ORDER BY id LIMIT @limit`,
    params: { after: query.after ?? MIN_INT64, limit: query.limit },
  }
}

/**
 * The statement counting each branch's matches up to probeCap, one column per branch (b0, b1, …),
 * or undefined when the page needs no probe (no ship date range, or a petId). With a metadata
 * filter, the pairs' entries instead (metadataProbe).
 */
export function orderPageProbe(query: OrderPageQuery, dialect: PageDialect): NamedStatement | undefined {
  const { filters } = query
  if (filters.metadata !== undefined) return metadataProbe(query)
  if ((filters.shipDateFrom === undefined && filters.shipDateTo === undefined) || filters.petId !== undefined) return undefined
  const { wheres, params } = branches(query, dialect)
  if (wheres.length === 0) return undefined
  params.cap = probeCap(query.limit)
  const columns = wheres.map((where, i) => `(SELECT count(*) FROM (SELECT 1 FROM ${dialect.through(BY_SHIP_DATE)} WHERE ${where} ORDER BY ship_date LIMIT @cap) AS p) AS b${i}`)
  return { sql: `SELECT ${columns.join(', ')}`, params }
}

/**
 * A page with a metadata filter is read from order_metadata's primary key, (key, value, order_id),
 * which the database keeps from each order's metadata: the entries of one pair, in order_id order
 * from the keyset position on, `… ORDER BY order_id LIMIT n`. Each entry's order is kept if it has
 * the other pairs too (one lookup in the same key each) and its row matches the other filters (one
 * lookup by id), so the read stops after n matches, sorting nothing. Then, as on every page, the
 * page's rows are read by id. The pair read is the one with the fewest entries after the position
 * (metadataProbe counts each up to probeCap; with one pair there is nothing to choose), so a rare
 * customer id with a common channel reads the customer's orders, not the channel's. A pair with no
 * entry there: the page is empty, read nothing.
 *
 * Each lookup is an EXISTS with `LIMIT 1 OFFSET 0`: PostgreSQL would otherwise turn it into a join it
 * may reorder (hash the other pair's entries, or every order of a status, then sort all matches);
 * an OFFSET keeps it a lookup per entry. SQLite runs it as one in any case (and wants LIMIT before
 * OFFSET). The price, as for a dense branch: when few of a pair's orders match the other filters (a
 * status rare among them), the read goes through the pair's entries until it finds n.
 */
function metadataStatement(query: OrderPageQuery, dialect: PageDialect, counts?: number[]): NamedStatement | undefined {
  const { filters, after } = query
  const pairs = [...filters.metadata!]
  if (counts?.some((count) => count === 0)) return undefined
  // The pair read first as @metaKey0/@metaValue0: the text depends only on how many pairs there are.
  const first = counts === undefined ? 0 : counts.indexOf(Math.min(...counts))
  pairs.unshift(...pairs.splice(first, 1))
  const params: Record<string, unknown> = { limit: query.limit }
  const conditions = [pairCondition(params, 0, pairs[0]!, 'm')]
  if (after !== undefined) {
    conditions.push('m.order_id > @after')
    params.after = after
  }
  for (let i = 1; i < pairs.length; i++) {
    conditions.push(`EXISTS (SELECT 1 FROM order_metadata AS m${i} WHERE ${pairCondition(params, i, pairs[i]!, `m${i}`)} AND m${i}.order_id = m.order_id LIMIT 1 OFFSET 0)`)
  }
  const row = filters.statuses.map((status, i) => {
    params[`status${i}`] = status
    return `@status${i}`
  })
  const rowConditions = [`o.id = m.order_id`, `o.status IN (${row.join(', ')})`]
  if (filters.complete !== undefined) {
    rowConditions.push('o.complete = @complete')
    params.complete = dialect.bool(filters.complete)
  }
  if (filters.petId !== undefined) {
    rowConditions.push('o.pet_id = @petId')
    params.petId = filters.petId
  }
  if (filters.shipDateFrom !== undefined) {
    rowConditions.push('o.ship_date >= @shipDateFrom')
    params.shipDateFrom = filters.shipDateFrom
  }
  if (filters.shipDateTo !== undefined) {
    rowConditions.push('o.ship_date < @shipDateTo')
    params.shipDateTo = filters.shipDateTo
  }
  conditions.push(`EXISTS (SELECT 1 FROM orders AS o WHERE ${rowConditions.join(' AND ')} LIMIT 1 OFFSET 0)`)
  const ids = `SELECT m.order_id FROM order_metadata AS m WHERE ${conditions.join(' AND ')} ORDER BY m.order_id LIMIT @limit`
  return { sql: `SELECT ${dialect.columns} FROM orders WHERE id IN (${ids}) ORDER BY id`, params }
}

/**
 * With two or three pairs, the statement counting each pair's entries after the keyset position, up
 * to probeCap, one column per pair in key order (b0, b1, …): index-only, in order_id order so that
 * PostgreSQL stops at the cap rather than collect every entry first.
 */
function metadataProbe(query: OrderPageQuery): NamedStatement | undefined {
  const pairs = [...query.filters.metadata!]
  if (pairs.length < 2) return undefined
  const params: Record<string, unknown> = { cap: probeCap(query.limit) }
  if (query.after !== undefined) params.after = query.after
  const columns = pairs.map((pair, i) => {
    const where = [pairCondition(params, i, pair), ...(query.after === undefined ? [] : ['order_id > @after'])].join(' AND ')
    return `(SELECT count(*) FROM (SELECT 1 FROM order_metadata WHERE ${where} ORDER BY order_id LIMIT @cap) AS p) AS b${i}`
  })
  return { sql: `SELECT ${columns.join(', ')}`, params }
}

/** `key = @metaKeyI AND value = @metaValueI` (qualified by `table`), its parameters set. */
function pairCondition(params: Record<string, unknown>, i: number, [key, value]: readonly [string, string], table?: string): string {
  params[`metaKey${i}`] = key
  params[`metaValue${i}`] = value
  const t = table === undefined ? '' : `${table}.`
  return `${t}key = @metaKey${i} AND ${t}value = @metaValue${i}`
}

/** Each branch's WHERE; `inIdOrder(i)`: branch i is dense, so its ship date must not pick an index. */
function branches(
  query: OrderPageQuery,
  dialect: PageDialect,
  inIdOrder: (branch: number) => boolean = () => false,
): { wheres: string[]; params: Record<string, unknown> } {
  const { filters, after } = query
  const params: Record<string, unknown> = {}
  const range = (shipDate: string): string[] => {
    const conditions: string[] = []
    if (filters.shipDateFrom !== undefined) conditions.push(`${shipDate} >= @shipDateFrom`)
    if (filters.shipDateTo !== undefined) conditions.push(`${shipDate} < @shipDateTo`)
    return conditions
  }
  if (filters.shipDateFrom !== undefined) params.shipDateFrom = filters.shipDateFrom
  if (filters.shipDateTo !== undefined) params.shipDateTo = filters.shipDateTo
  const common: string[] = []
  if (after !== undefined) {
    common.push('id > @after')
    params.after = after
  }
  const pet = filters.petId === undefined ? '' : 'pet_id = @petId AND '
  if (filters.petId !== undefined) params.petId = filters.petId
  const wheres: string[] = []
  for (const status of filters.statuses) {
    for (const complete of filters.complete === undefined ? [false, true] : [filters.complete]) {
      if (complete && status !== 'shipped') continue
      const shipDate = inIdOrder(wheres.length) ? dialect.unindexed('ship_date') : 'ship_date'
      // Parameters named by the branch's number: no value of the filters is written into the text.
      const branch = wheres.length
      params[`status${branch}`] = status
      params[`complete${branch}`] = dialect.bool(complete)
      wheres.push([`${pet}status = @status${branch} AND complete = @complete${branch}`, ...range(shipDate), ...common].join(' AND '))
    }
  }
  return { wheres, params }
}
