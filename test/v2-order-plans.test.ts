import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import pg from 'pg'
import { demoOrders } from '../src/demo/demo-data.js'
import type { OrderMetadata } from '../src/domain/order-metadata.js'
import type { OrderFilters, OrderPageQuery } from '../src/domain/order-pages.js'
import { ORDER_STATUSES, type OrderRecord, type OrderStatus } from '../src/domain/orders.js'
import { orderPageJsonStatement, orderPageProbe, orderPageStatement, probeCap, type NamedStatement } from '../src/store/order-page-sql.js'
import { runMigrations } from '../src/store/postgres/migration-runner.js'
import { POSTGRES_MIGRATIONS } from '../src/store/postgres/migrations.js'
import { POSTGRES_PAGE_DIALECT, positional } from '../src/store/postgres/order-pages.js'
import { PostgresStore } from '../src/store/postgres/postgres-store.js'
import { SQLITE_PAGE_DIALECT } from '../src/store/sqlite/order-pages.js'
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './support/postgres.js'

const NOW = new Date('2026-11-26T12:00:00Z')
const DAY = 86_400_000
const at = (days: number): string => new Date(NOW.getTime() + days * DAY).toISOString()

/** Every filter and combination the list takes, as first and second pages. */
function queries(): OrderPageQuery[] {
  const statusSets: OrderStatus[][] = [['pending', 'shipped'], ['cancelled'], ['pending'], ['shipped', 'cancelled'], [...ORDER_STATUSES]]
  const extras: Omit<OrderFilters, 'statuses'>[] = [
    {},
    { petId: 42n },
    { complete: true },
    { complete: false },
    { shipDateFrom: at(3), shipDateTo: at(4) }, // a day: dense for pending, empty for shipped
    { shipDateFrom: at(3), shipDateTo: at(3 + 1 / 24) }, // an hour: sparse
    { shipDateFrom: at(-7) },
    { shipDateTo: at(-50) },
    { petId: 42n, complete: false, shipDateFrom: at(-30), shipDateTo: at(30) },
    { complete: true, shipDateFrom: at(-10), shipDateTo: at(-9) },
  ]
  return statusSets.flatMap((statuses) =>
    extras.flatMap((extra) => [undefined, 2000n].map((position) => ({ filters: { statuses, ...extra }, after: position, limit: 101 }))),
  )
}

/**
 * The demo orders, with metadata: every tenth a `customer` of 100, every other a `channel` of two,
 * every tenth a `tier`, one in a thousand a `ref` of its own.
 */
async function* withMetadata(orders: number): AsyncGenerator<OrderRecord> {
  let i = 0
  for await (const record of demoOrders({ orders, now: NOW })) {
    i++
    const metadata: OrderMetadata = {}
    if (i % 10 === 0) metadata.customer = `c-${(i / 10) % 100}`
    if (i % 2 === 0) metadata.channel = i % 4 === 0 ? 'web' : 'app'
    if (i % 10 === 5) metadata.tier = 'gold'
    if (i % 1000 === 7) metadata.ref = `r-${i}`
    yield { ...record, metadata: Object.keys(metadata).length === 0 ? null : metadata }
  }
}

/** Metadata filters of one to three pairs, rare and common, with the other filters, as first and second pages. */
function metadataQueries(): OrderPageQuery[] {
  const pairs: [string, string][][] = [
    [['customer', 'c-7']],
    [['channel', 'web']],
    [['ref', 'r-7']],
    [['nobody', 'x']],
    [['channel', 'web'], ['customer', 'c-4']],
    [['channel', 'app'], ['tier', 'gold']],
    [['channel', 'web'], ['customer', 'c-8'], ['tier', 'gold']],
  ]
  const others: OrderFilters[] = [
    { statuses: ['pending', 'shipped'] },
    { statuses: ['cancelled'] },
    { statuses: [...ORDER_STATUSES], petId: 42n },
    { statuses: ['shipped'], complete: true, shipDateFrom: at(-10), shipDateTo: at(-9) },
    { statuses: ['pending'], complete: false, shipDateFrom: at(3) },
  ]
  return pairs.flatMap((metadata) =>
    others.flatMap((filters) => [undefined, 2000n].map((after) => ({ filters: { ...filters, metadata: new Map(metadata) }, after, limit: 101 }))),
  )
}

/**
 * Every way the store may read a metadata page: from the probe's counts, and from each pair in turn
 * (as if it were the rarest), each as rows and as JSON.
 */
function metadataVariants(query: OrderPageQuery, dialect: typeof SQLITE_PAGE_DIALECT): NamedStatement[] {
  const pairs = query.filters.metadata!.size
  const ways = pairs === 1 ? [undefined] : Array.from({ length: pairs }, (_, i) => Array.from({ length: pairs }, (_, j) => (j === i ? 1 : 2)))
  return ways.flatMap((counts) => [orderPageStatement(query, dialect, counts)!, orderPageJsonStatement(query, dialect, counts)!])
}

const describeQuery = (query: OrderPageQuery): string =>
  JSON.stringify(query, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v instanceof Map ? [...(v as Map<string, string>)] : v))

/**
 * The page statement as the store builds it from the probe's counts and, after a probe, with every
 * branch dense (read in id order). A sparse branch has fewer than probeCap rows in its range; on
 * these small tables a forced "sparse" reading of a wide range would rightly prefer a scan.
 */
function variants(query: OrderPageQuery, dialect: typeof SQLITE_PAGE_DIALECT, probed: number[] | undefined): NamedStatement[] {
  const ways = probed === undefined ? [undefined] : [probed, probed.map(() => probeCap(query.limit))]
  // Each as rows and as JSON (pageJson reads one order more than its page: here, a page of limit - 1).
  return ways
    .flatMap((counts) => [orderPageStatement(query, dialect, counts), orderPageJsonStatement(query, dialect, counts)])
    .filter((s): s is NamedStatement => s !== undefined)
}

describe('v2 list plans [sqlite]: every filter is served by an index, never a scan of orders', () => {
  let dir: string
  let db: Database.Database

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-plans-'))
    const store = new SqliteStore(join(dir, 'petstore.db'))
    await store.migrate()
    await store.orders.import(withMetadata(5000))
    await store.close()
    db = new Database(join(dir, 'petstore.db'))
    db.defaultSafeIntegers(true)
    db.exec('ANALYZE') // the statistics a deployment gets from PRAGMA optimize
  })
  after(() => {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('never plans SCAN orders, for the probe or any way of reading a page', () => {
    let checked = 0
    for (const query of queries()) {
      const probe = orderPageProbe(query, SQLITE_PAGE_DIALECT)
      const counts = probe === undefined ? undefined : Object.values(db.prepare(probe.sql).get(probe.params) as Record<string, bigint>).map(Number)
      for (const statement of [...(probe === undefined ? [] : [probe]), ...variants(query, SQLITE_PAGE_DIALECT, counts)]) {
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${statement.sql}`).all(statement.params) as { detail: string }[]).map((row) => row.detail)
        const where = `${JSON.stringify(query, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}\n${plan.join('\n')}`
        assert.ok(!plan.some((line) => /^SCAN orders\b/.test(line)), where)
        assert.ok(plan.some((line) => /^SEARCH orders USING (COVERING )?INDEX orders_|^SEARCH orders USING INTEGER PRIMARY KEY/.test(line)), where)
        checked++
      }
    }
    assert.ok(checked > 300, `${checked} plans`)
  })

  it("a metadata page reads order_metadata's primary key in order_id order: no scan, no sort, each order and each other pair by its key", () => {
    let checked = 0
    for (const query of metadataQueries()) {
      const probe = orderPageProbe(query, SQLITE_PAGE_DIALECT)
      const statements = [...(probe === undefined ? [] : [probe]), ...metadataVariants(query, SQLITE_PAGE_DIALECT)]
      for (const statement of statements) {
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${statement.sql}`).all(statement.params) as { detail: string }[]).map((row) => row.detail)
        const where = `${describeQuery(query)}\n${plan.join('\n')}`
        // What may be scanned: the constant row of the probe, and the page's own rows (a co-routine).
        assert.ok(plan.every((line) => !/^SCAN (?!CONSTANT ROW$|p$|\(subquery-\d+\)$)/.test(line)), where)
        assert.ok(!plan.some((line) => /TEMP B-TREE/.test(line)), where)
        if (statement === probe) {
          assert.equal(plan.filter((line) => /^SEARCH order_metadata USING PRIMARY KEY \(key=\? AND value=\?/.test(line)).length, query.filters.metadata!.size, where)
          continue
        }
        assert.ok(plan.includes(`SEARCH m USING PRIMARY KEY (key=? AND value=?${query.after === undefined ? '' : ' AND order_id>?'})`), where)
        for (let i = 1; i < query.filters.metadata!.size; i++) assert.ok(plan.includes(`SEARCH m${i} USING PRIMARY KEY (key=? AND value=? AND order_id=?)`), where)
        assert.ok(plan.includes('SEARCH o USING INTEGER PRIMARY KEY (rowid=?)'), where)
        assert.ok(plan.includes('SEARCH orders USING INTEGER PRIMARY KEY (rowid=?)'), where)
        checked++
      }
    }
    assert.ok(checked > 200, `${checked} plans`)
  })
})

describe('v2 list plans [postgres]: every filter is served by an index, never a Seq Scan of orders', async () => {
  const reason = await postgresSkipReason()
  if (reason !== undefined) {
    it('PostgreSQL', { skip: reason }, () => {})
    return
  }
  let database: TestDatabase
  let client: pg.Client

  before(async () => {
    database = await createTestDatabase()
    const store = new PostgresStore(database.url)
    await store.migrate()
    await store.orders.import(withMetadata(20_000))
    await store.close()
    client = new pg.Client({ connectionString: database.url })
    await client.connect()
    await client.query('VACUUM ANALYZE orders') // the statistics autovacuum keeps
    await client.query('VACUUM ANALYZE order_metadata')
  })
  after(async () => {
    await client?.end()
    await database?.drop()
  })

  it('never plans a Seq Scan on orders, for the probe or any way of reading a page', async () => {
    let checked = 0
    for (const query of queries()) {
      const probe = orderPageProbe(query, POSTGRES_PAGE_DIALECT)
      let counts: number[] | undefined
      if (probe !== undefined) {
        const { sql, params } = positional(probe)
        counts = Object.values((await client.query<Record<string, string>>(sql, params)).rows[0]!).map(Number)
      }
      for (const statement of [...(probe === undefined ? [] : [probe]), ...variants(query, POSTGRES_PAGE_DIALECT, counts)]) {
        const { sql, params } = positional(statement)
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)
        const plan = rows.map((row) => row['QUERY PLAN']).join('\n')
        const where = `${JSON.stringify(query, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}\n${plan}`
        assert.ok(!/Seq Scan on orders/.test(plan), where)
        assert.match(plan, /Index (Only )?Scan (Backward )?using orders_|Bitmap Index Scan on orders_/, where)
        checked++
      }
    }
    assert.ok(checked > 300, `${checked} plans`)
  })

  it("a metadata page reads order_metadata's primary key in order_id order: no scan, no sort of its matches, each order and each other pair by its key", async () => {
    let checked = 0
    for (const query of metadataQueries()) {
      const probe = orderPageProbe(query, POSTGRES_PAGE_DIALECT)
      const statements = [...(probe === undefined ? [] : [probe]), ...metadataVariants(query, POSTGRES_PAGE_DIALECT)]
      for (const statement of statements) {
        const { sql, params } = positional(statement)
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)
        const plan = rows.map((row) => row['QUERY PLAN']).join('\n')
        const where = `${describeQuery(query)}\n${plan}`
        assert.doesNotMatch(plan, /Seq Scan|Bitmap/, where)
        const pairs = query.filters.metadata!.size
        if (statement === probe) {
          assert.equal(plan.match(/Limit .*\n\s*-> {2}Index Only Scan using order_metadata_pkey on order_metadata/g)?.length, pairs, where)
          continue
        }
        // The pair read first: its index, in order, straight under the page's LIMIT (nothing sorted in between).
        assert.match(plan, /Limit .*\n\s*-> {2}Index Only Scan using order_metadata_pkey on order_metadata m .*\n\s*Index Cond: \(\(key = /, where)
        // Each other pair, and the order's row, looked up by key for each entry.
        assert.equal(plan.match(/Index Only Scan using order_metadata_pkey on order_metadata m\d .*\n\s*Index Cond: .*order_id = m\.order_id\)/g)?.length ?? 0, pairs - 1, where)
        assert.match(plan, /Index (Only )?Scan using orders_\w+ on orders o .*\n\s*Index Cond: .*id = m\.order_id\)/, where)
        checked++
      }
    }
    assert.ok(checked > 200, `${checked} plans`)
  })

  it('a CONCURRENTLY index build that was interrupted (left INVALID) is dropped and built again by migrate', async () => {
    // A database as a migration killed during migration 7's build leaves it: 1–6 applied, and the
    // INVALID index a failed CREATE INDEX CONCURRENTLY keeps, under migration 7's index name.
    const interrupted = await createTestDatabase()
    const raw = new pg.Client({ connectionString: interrupted.url })
    try {
      await raw.connect()
      assert.deepEqual(await runMigrations(raw, POSTGRES_MIGRATIONS.filter((m) => m.version <= 6)), [1, 2, 3, 4, 5, 6])
      await raw.query(`INSERT INTO orders (id, status) VALUES (1, 'pending'), (2, 'pending')`)
      await assert.rejects(raw.query('CREATE UNIQUE INDEX CONCURRENTLY orders_status_complete_ship_date ON orders (status)'))
      const invalid = await raw.query(`SELECT indisvalid FROM pg_index WHERE indexrelid = 'orders_status_complete_ship_date'::regclass`)
      assert.equal(invalid.rows[0].indisvalid, false)
      const store = new PostgresStore(interrupted.url)
      try {
        const rest = POSTGRES_MIGRATIONS.filter((m) => m.version >= 7).map((m) => m.version)
        assert.deepEqual(await store.migrate(), rest)
        assert.deepEqual(await store.migrate(), [])
      } finally {
        await store.close()
      }
      const { rows } = await raw.query(
        `SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i WHERE indexrelid = 'orders_status_complete_ship_date'::regclass`,
      )
      assert.equal(rows[0].indisvalid, true)
      assert.match(rows[0].def, /\(status, complete, ship_date, id\)$/)
    } finally {
      await raw.end()
      await interrupted.drop()
    }
  })
})
