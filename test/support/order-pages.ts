import type { OrderPageQuery } from '../../src/domain/order-pages.js'
import type { OrderV2Record } from '../../src/domain/orders.js'
import { orderPageProbe, orderPageStatement } from '../../src/store/order-page-sql.js'
import { PostgresDatabase } from '../../src/store/postgres/database.js'
import { POSTGRES_PAGE_DIALECT, positional } from '../../src/store/postgres/order-pages.js'
import { connect } from '../../src/store/sqlite/database.js'
import { SQLITE_PAGE_DIALECT } from '../../src/store/sqlite/order-pages.js'
import { toOrderV2Record, type OrderV2Row } from '../../src/store/rows.js'
import type { TestDatabaseHandle } from './harness.js'

/**
 * A v2 page as records: the statement the stores read a page with (orderPageStatement, after its
 * probe), selecting the order's columns, run on a connection of the test's own and read as the
 * store reads an order. What the store's page JSON (orders.pageJson) is held equal to.
 */
export async function pageRecords(database: TestDatabaseHandle, query: OrderPageQuery): Promise<OrderV2Record[]> {
  if (database.config.kind === 'sqlite') {
    const db = connect(database.config.path, true, 1000)
    try {
      const probe = orderPageProbe(query, SQLITE_PAGE_DIALECT)
      const counts = probe === undefined ? undefined : Object.values(db.prepare(probe.sql).get(probe.params) as Record<string, bigint>).map(Number)
      const page = orderPageStatement(query, SQLITE_PAGE_DIALECT, counts)
      return page === undefined ? [] : (db.prepare(page.sql).all(page.params) as OrderV2Row[]).map(toOrderV2Record)
    } finally {
      db.close()
    }
  }
  const db = new PostgresDatabase(database.config.url, { poolSize: 1 })
  try {
    const probe = orderPageProbe(query, POSTGRES_PAGE_DIALECT)
    let counts: number[] | undefined
    if (probe !== undefined) {
      const { sql, params } = positional(probe)
      counts = Object.values((await db.read<Record<string, bigint>>(sql, params)).rows[0]!).map(Number)
    }
    const page = orderPageStatement(query, POSTGRES_PAGE_DIALECT, counts)
    if (page === undefined) return []
    const { sql, params } = positional(page)
    return (await db.read<OrderV2Row>(sql, params)).rows.map(toOrderV2Record)
  } finally {
    await db.close()
  }
}
