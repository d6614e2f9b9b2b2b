/**
 * Where an import's time goes: imports the bench's data set (bench/lib/dataset.ts) through the
 * store's own orders.import into the fresh database DATABASE_URL names, with every database call
 * timed by statement, and prints the breakdown. With --skip-events, a bench-only trigger first makes
 * every INSERT into order_events a no-op (as comparison 8's cancel baseline does), so that the two
 * runs differ only by the event rows. The timing wrappers cost a little per call: compare runs of
 * this script with each other, not with `npm run bench`.
 *
 *   DATABASE_URL=sqlite:/tmp/x.db node --import tsx bench/profile-import.ts 1000000 [--skip-events]
 *
 * SQLite calls are synchronous, so their times add up. PostgreSQL's import writes one batch while
 * it builds the next, so a statement's time there is its wall time, overlapping the caller's work.
 */
import Database from 'better-sqlite3'
import pg from 'pg'
import { loadDatabaseConfig } from '../src/config.js'
import { openStore } from '../src/store/open-store.js'
import { orderRecords } from './lib/dataset.js'

const totals = new Map<string, { calls: number; ms: number }>()

function record(sql: string, ms: number): void {
  const label = sql.replace(/\s+/g, ' ').trim().slice(0, 70)
  const entry = totals.get(label) ?? { calls: 0, ms: 0 }
  entry.calls++
  entry.ms += ms
  totals.set(label, entry)
}

function timeSqlite(): void {
  const prepare = Database.prototype.prepare
  Database.prototype.prepare = function (this: Database.Database, source: string) {
    const statement = prepare.call(this, source)
    for (const method of ['run', 'get', 'all'] as const) {
      const original = statement[method] as (...args: unknown[]) => unknown
      ;(statement as unknown as Record<string, unknown>)[method] = function (this: unknown, ...args: unknown[]) {
        const started = performance.now()
        try {
          return original.apply(this, args)
        } finally {
          record(source, performance.now() - started)
        }
      }
    }
    return statement
  } as typeof prepare
  const exec = Database.prototype.exec
  Database.prototype.exec = function (this: Database.Database, source: string) {
    const started = performance.now()
    try {
      return exec.call(this, source)
    } finally {
      record(source, performance.now() - started)
    }
  }
}

function timePostgres(): void {
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown
  ;(pg.Client.prototype as unknown as { query: unknown }).query = function (this: pg.Client, ...args: unknown[]) {
    const started = performance.now()
    const text = typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string } | undefined)?.text ?? '(other)')
    const done = (): void => record(text, performance.now() - started)
    // pg.Pool#query calls it with a callback, a checked-out connection with none (a promise).
    const callback = args.at(-1)
    if (typeof callback === 'function') {
      args[args.length - 1] = (...results: unknown[]) => {
        done()
        return (callback as (...results: unknown[]) => unknown)(...results)
      }
    }
    const result = query.apply(this, args)
    if (result instanceof Promise) result.then(done, done)
    return result
  }
}

const orders = Number(process.argv[2] ?? 1_000_000)
const skipEvents = process.argv.includes('--skip-events')
const config = loadDatabaseConfig()
const store = await openStore(config)
try {
  await store.migrate()
  if (skipEvents) {
    const sql =
      store.kind === 'sqlite'
        ? 'CREATE TRIGGER bench_skip_order_event BEFORE INSERT ON order_events BEGIN SELECT RAISE(IGNORE); END'
        : `CREATE FUNCTION bench_skip_order_event() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
           CREATE TRIGGER bench_skip_order_event BEFORE INSERT ON order_events FOR EACH ROW EXECUTE FUNCTION bench_skip_order_event()`
    if (config.kind === 'sqlite') {
      const db = new Database(config.path)
      db.exec(sql)
      db.close()
    } else {
      const client = new pg.Client({ connectionString: config.url })
      await client.connect()
      await client.query(sql)
      await client.end()
    }
  }
  if (store.kind === 'sqlite') timeSqlite()
  else timePostgres()
  // What producing the records costs alone, for scale.
  let started = performance.now()
  for await (const _ of orderRecords(orders)) void _
  const generateMs = performance.now() - started
  started = performance.now()
  const imported = await store.orders.import(orderRecords(orders))
  const importMs = performance.now() - started
  const rows = [...totals].sort((a, b) => b[1].ms - a[1].ms)
  console.log(`${store.kind}: ${imported.toLocaleString('en-US')} orders imported in ${(importMs / 1000).toFixed(1)} s${skipEvents ? ' (event rows skipped by a trigger)' : ''}; generating the records alone: ${(generateMs / 1000).toFixed(1)} s`)
  for (const [label, { calls, ms }] of rows) {
    if (ms < 10) continue
    console.log(`${(ms / 1000).toFixed(2).padStart(8)} s ${String(calls).padStart(9)} calls  ${label}`)
  }
} finally {
  await store.close()
}
