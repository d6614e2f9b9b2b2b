/**
 * Shows how each filter of the v2 list is read on the database DATABASE_URL names (seed it first:
 * `petstore-orders seed --orders 1000000`): for the first and second page of every filter, the
 * probe's counts, the execution time and the scans of the plan. On PostgreSQL the plans are
 * EXPLAIN ANALYZE's; `-v` prints them whole.
 *
 *   DATABASE_URL=postgres://… node --import tsx bench/explain-v2-pages.ts [-v]
 */
import Database from 'better-sqlite3'
import pg from 'pg'
import { loadDatabaseConfig } from '../src/config.js'
import type { OrderFilters, OrderPageQuery } from '../src/domain/order-pages.js'
import { orderPageProbe, orderPageStatement, type NamedStatement } from '../src/store/order-page-sql.js'
import { POSTGRES_PAGE_DIALECT, positional } from '../src/store/postgres/order-pages.js'
import { SQLITE_PAGE_DIALECT } from '../src/store/sqlite/order-pages.js'

const verbose = process.argv.includes('-v')
// Ship dates of the demo data are around today: pending within three weeks, shipped in the last two months.
const day = (d: number): string => new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000 + d * 86_400_000).toISOString()
const CASES: [string, OrderFilters][] = [
  ['default (pending,shipped)', { statuses: ['pending', 'shipped'] }],
  ['all statuses', { statuses: ['pending', 'shipped', 'cancelled'] }],
  ['status=cancelled', { statuses: ['cancelled'] }],
  ['petId=4242', { statuses: ['pending', 'shipped'], petId: 4242n }],
  ['complete=true', { statuses: ['pending', 'shipped'], complete: true }],
  ['complete=false', { statuses: ['pending', 'shipped'], complete: false }],
  ['shipDate: 1 day', { statuses: ['pending', 'shipped'], shipDateFrom: day(3), shipDateTo: day(4) }],
  ['shipDate: 1 hour', { statuses: ['pending', 'shipped'], shipDateFrom: day(3), shipDateTo: day(3 + 1 / 24) }],
  ['shipDate: 7 days', { statuses: ['pending', 'shipped'], shipDateFrom: day(-7), shipDateTo: day(0) }],
  ['shipDateFrom only', { statuses: ['pending', 'shipped'], shipDateFrom: day(10) }],
  ['cancelled + 1 day', { statuses: ['cancelled'], shipDateFrom: day(3), shipDateTo: day(4) }],
  ['shipped, complete=false, 1 day', { statuses: ['shipped'], complete: false, shipDateFrom: day(-10), shipDateTo: day(-9) }],
  ['petId + cancelled + complete=false', { statuses: ['cancelled'], petId: 4242n, complete: false }],
]

interface Explainer {
  counts(probe: NamedStatement): Promise<number[]>
  /** The plan, its execution time in ms, and the ids of the page. */
  explain(page: NamedStatement): Promise<{ plan: string[]; ms: number; ids: bigint[] }>
  close(): Promise<void>
}

async function postgres(url: string): Promise<Explainer> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  return {
    async counts(probe) {
      const { sql, params } = positional(probe)
      return Object.values((await client.query<Record<string, string>>(sql, params)).rows[0]!).map(Number)
    },
    async explain(page) {
      const { sql, params } = positional(page)
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params)
      const plan = rows.map((row) => row['QUERY PLAN'])
      const ms = Number(/Execution Time: ([0-9.]+)/.exec(plan.join('\n'))![1])
      const ids = (await client.query<{ id: string }>(sql, params)).rows.map((row) => BigInt(row.id))
      return { plan, ms, ids }
    },
    close: () => client.end(),
  }
}

function sqlite(path: string): Explainer {
  const db = new Database(path, { readonly: true })
  db.defaultSafeIntegers(true)
  return {
    async counts(probe) {
      return Object.values(db.prepare(probe.sql).get(probe.params) as Record<string, bigint>).map(Number)
    },
    async explain(page) {
      const statement = db.prepare(page.sql)
      statement.all(page.params) // warm
      const started = performance.now()
      const rows = statement.all(page.params) as { id: bigint }[]
      const ms = performance.now() - started
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${page.sql}`).all(page.params) as { detail: string }[]).map((row) => row.detail)
      return { plan, ms, ids: rows.map((row) => row.id) }
    },
    close: async () => {
      db.close()
    },
  }
}

async function main(): Promise<void> {
  const database = loadDatabaseConfig()
  const explainer = database.kind === 'postgres' ? await postgres(database.url) : sqlite(database.path)
  const dialect = database.kind === 'postgres' ? POSTGRES_PAGE_DIALECT : SQLITE_PAGE_DIALECT
  const scans = /Seq Scan on \w+|Index (?:Only )?Scan (?:Backward )?using \w+|Bitmap Index Scan on \w+|^(?:SCAN|SEARCH) .*/
  try {
    for (const [name, filters] of CASES) {
      let after: bigint | undefined
      for (const page of [1, 2]) {
        const query: OrderPageQuery = { filters, after, limit: 101 }
        const probe = orderPageProbe(query, dialect)
        const counts = probe === undefined ? undefined : await explainer.counts(probe)
        const statement = orderPageStatement(query, dialect, counts)
        if (statement === undefined) {
          console.log(`${name} p${page}: no statement (no order can match)`)
          break
        }
        const { plan, ms, ids } = await explainer.explain(statement)
        const reads = [...new Set(plan.map((line) => scans.exec(line.trim())?.[0]).filter((read) => read !== undefined))]
        console.log(`${name} p${page}: ${ms.toFixed(3)} ms, ${ids.length} rows, probe ${counts?.join('/') ?? '-'}; ${reads.join(' | ')}`)
        if (verbose) console.log(plan.join('\n'))
        if (ids.length < 101) break
        after = ids[99]
      }
    }
  } finally {
    await explainer.close()
  }
}

await main()
