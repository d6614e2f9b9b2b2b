import type Database from 'better-sqlite3'
import type { OrderPageQuery } from '../../domain/order-pages.js'
import type { OrderV2Record } from '../../domain/orders.js'
import type { OrderPageJson } from '../store.js'
import { toOrderV2Record, type OrderV2Row } from '../rows.js'
import { orderPageJsonStatement, orderPageProbe, toPageJson, type PageDialect } from '../order-page-sql.js'
import { statement } from './database.js'


/** The v2 reads of the SQLite store; each takes the connection to read on. */

/** The columns of an order as v2 shows it (getOrder, the cancels' answers), read as an OrderV2Row. */
export const ORDER_V2_COLUMNS = 'id, pet_id, quantity, ship_date, complete, status, shipped_at, completed_at, cancelled_at, cancellation_reason, metadata, version'

/**
 * An order's v2 JSON, as the OrderV2 serializer writes it: required fields first, absent ones omitted
 * (`',"petId":' || NULL` is NULL; json_quote(NULL) is 'null', hence the iif), ids as SQLite's exact
 * integer text. Pages and events build it from the row's columns.
 */
export const ORDER_V2_JSON = `'{"id":' || id || iif(complete, ',"complete":true', ',"complete":false') || ',"status":"' || status || '","version":' || version
    || coalesce(',"petId":' || pet_id, '') || coalesce(',"quantity":' || quantity, '')
    || iif(ship_date IS NULL, '', ',"shipDate":' || json_quote(ship_date))
    || iif(status <> 'shipped' OR shipped_at IS NULL, '', ',"shippedAt":' || json_quote(shipped_at))
    || iif(status <> 'shipped' OR NOT complete OR completed_at IS NULL, '', ',"completedAt":' || json_quote(completed_at))
    || iif(status <> 'cancelled' OR cancelled_at IS NULL, '', ',"cancelledAt":' || json_quote(cancelled_at))
    || iif(status <> 'cancelled' OR cancellation_reason IS NULL, '', ',"cancellationReason":' || json_quote(cancellation_reason))
    || coalesce(',"metadata":' || metadata, '') || '}'`

export const SQLITE_PAGE_DIALECT: PageDialect = {
  columns: ORDER_V2_COLUMNS,
  json: ORDER_V2_JSON,
  // As a BLOB: the page reaches JavaScript as its UTF-8 bytes (see JSON_PAGE in orders-repository.ts).
  // The rows reach group_concat in id order: a subquery with ORDER BY is not flattened into an
  // aggregate, it runs as a co-routine (an ORDER BY inside group_concat would sort the page again, at
  // a third of the cost of building it). test/v2-page-json.test.ts holds the order.
  jsonPage: (rows) => `SELECT CAST('[' || coalesce(group_concat(json, ','), '') || ']' AS BLOB), count(*) FROM (${rows})`,
  bool: (value) => (value ? 1 : 0),
  through: (index) => `orders INDEXED BY ${index}`,
  unindexed: (column) => `+${column}`,
}

export function readOrderPageJson(db: Database.Database, query: OrderPageQuery): OrderPageJson {
  const read = { ...query, limit: query.limit + 1 }
  const probe = orderPageProbe(read, SQLITE_PAGE_DIALECT)
  const counts = probe === undefined ? undefined : Object.values(statement(db, probe.sql).get(probe.params) as Record<string, bigint>).map(Number)
  const page = orderPageJsonStatement(read, SQLITE_PAGE_DIALECT, counts)
  if (page === undefined) return { json: Buffer.from('[]'), lastId: undefined, more: false }
  const [json, count] = statement(db, page.sql).raw(true).get(page.params) as [Buffer, bigint]
  return toPageJson(json, Number(count), query.limit)
}

export function readOrderV2(db: Database.Database, id: bigint): OrderV2Record | undefined {
  const row = statement(db, `SELECT ${ORDER_V2_COLUMNS} FROM orders WHERE id = ?`).get(id) as OrderV2Row | undefined
  return row === undefined ? undefined : toOrderV2Record(row)
}

export function readCursorSecret(db: Database.Database): Buffer {
  const row = statement(db, `SELECT secret FROM signing_secrets WHERE purpose = 'list_cursor'`).get() as { secret: Buffer } | undefined
  if (row === undefined) throw new Error('no list cursor secret: the schema is not migrated')
  return row.secret
}
