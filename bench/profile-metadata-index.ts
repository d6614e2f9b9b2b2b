/**
 * What SQLite's metadata index costs a place, on the writer's own code alone: OrderWrites.place in
 * transactions of 50 (the batches the group commit makes at 50 clients) on one connection opened as
 * the writer opens it (synchronous=FULL), no server, no HTTP. Every run starts from a fresh copy of
 * one file seeded as comparison 13's (1 order in 10 with metadata). Layouts, each run in every round:
 *
 *   plain      places without metadata
 *   metadata   three keys as comparison 12 sends them (a customer of 1,000 at random, a cart of its
 *              own, one channel), the index as migrated (its trigger, into (key, value, order_id))
 *   no-index   the same places with the index's insert trigger dropped: what the index itself costs
 *   pending    the trigger writing each place's rows to an append-only table keyed by order id: what a
 *              pending list (merged into the index later in sorted bulk, as PostgreSQL's GIN does)
 *              would cost at the place; the merge is not counted
 *   fts        the index's trigger writing each place's pairs to a contentless FTS5 table instead (one
 *              token a pair, its hex, the order id as rowid): SQLite's own inverted index, which
 *              appends a segment a commit and merges segments in the background, as a pending list
 *              would, kept by SQLite itself (the filter would then be a MATCH; not measured here)
 *   cache      the index as migrated, the connection's page cache at 64 MiB instead of 2 (every page
 *              the index's inserts touch stays in memory)
 *   checkpoints  the index as migrated, the WAL checkpointed every 20,000 pages instead of 1,000 (a
 *              page the inserts dirty again and again is copied back to the database file less often)
 *
 * Prints, per layout, the wall time and the CPU time a place (medians of the rounds), and each
 * against plain.
 *
 *   node --import tsx bench/profile-metadata-index.ts [orders, default 100000] [places, default 20000] [rounds, default 5]
 */
import { copyFileSync, rmSync } from 'node:fs'
import Database from 'better-sqlite3'
import type { OrderMetadata } from '../src/domain/order-metadata.js'
import type { NewOrder } from '../src/domain/orders.js'
import { connect } from '../src/store/sqlite/database.js'
import { BUMP_DATA_VERSION } from '../src/store/sqlite/migrations.js'
import { OrderWrites, type Batch } from '../src/store/sqlite/order-writes.js'
import { compileBench } from './lib/compile.js'
import { createSqliteDatabase, dropAllDatabases } from './lib/databases.js'
import { PETS } from './lib/dataset.js'
import { median } from './lib/report.js'
import { seed } from './suites/context.js'

const orders = Number(process.argv[2] ?? 100_000)
const places = Number(process.argv[3] ?? 20_000)
const rounds = Number(process.argv[4] ?? 5)
const BATCH = 50

const LAYOUTS = {
  plain: { metadata: false, sql: '' },
  metadata: { metadata: true, sql: '' },
  'no-index': { metadata: true, sql: 'DROP TRIGGER orders_metadata_inserted' },
  pending: {
    metadata: true,
    sql: `DROP TRIGGER orders_metadata_inserted;
      CREATE TABLE order_metadata_pending (order_id INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (order_id, key)) WITHOUT ROWID;
      CREATE TRIGGER orders_metadata_pending AFTER INSERT ON orders WHEN NEW.metadata IS NOT NULL BEGIN
        INSERT INTO order_metadata_pending (order_id, key, value) SELECT NEW.id, key, value FROM json_each(NEW.metadata);
      END`,
  },
  fts: {
    metadata: true,
    sql: `DROP TRIGGER orders_metadata_inserted;
      CREATE VIRTUAL TABLE order_metadata_fts USING fts5(pairs, content='', contentless_delete=1, detail=none);
      CREATE TRIGGER orders_metadata_fts AFTER INSERT ON orders WHEN NEW.metadata IS NOT NULL BEGIN
        INSERT INTO order_metadata_fts (rowid, pairs) SELECT NEW.id, group_concat(hex(key || char(31) || value), ' ') FROM json_each(NEW.metadata);
      END`,
  },
  cache: { metadata: true, sql: 'PRAGMA cache_size = -65536' },
  checkpoints: { metadata: true, sql: 'PRAGMA wal_autocheckpoint = 20000' },
} as const
type Layout = keyof typeof LAYOUTS

let cart = 0
const metadata = (): OrderMetadata => ({
  customer: `cus_${String(Math.floor(Math.random() * 1000)).padStart(16, '0')}`,
  cart: `cart_${(cart++).toString(16).padStart(15, '0')}`,
  channel: 'web-storefront-eu-01',
})

/** One run: `places` places into a fresh copy of `seeded` laid out as `layout`; µs a place. */
function run(seeded: string, layout: Layout): { wallUs: number; cpuUs: number } {
  const path = `${seeded}.${layout}`
  copyFileSync(seeded, path)
  const db = connect(path, false, 5_000)
  try {
    if (LAYOUTS[layout].sql !== '') db.exec(LAYOUTS[layout].sql)
    const writes = new OrderWrites(db)
    const bump = db.prepare(BUMP_DATA_VERSION)
    const withMetadata = LAYOUTS[layout].metadata
    const commit = db.transaction((batch: NewOrder[]) => {
      const now: Batch = { now: new Date().toISOString(), changed: () => {} }
      for (const order of batch) if (writes.place(now, undefined, { order }).outcome !== 'placed') throw new Error('a place was refused')
      bump.run()
    })
    const batches = Array.from({ length: Math.ceil(places / BATCH) }, () =>
      Array.from({ length: BATCH }, (): NewOrder => ({ petId: 7n, quantity: 2, shipDate: null, ...(withMetadata ? { metadata: metadata() } : {}) })),
    )
    const cpu = process.cpuUsage()
    const start = process.hrtime.bigint()
    for (const batch of batches) commit.immediate(batch)
    const wallUs = Number(process.hrtime.bigint() - start) / 1e3
    const used = process.cpuUsage(cpu)
    const count = batches.length * BATCH
    return { wallUs: wallUs / count, cpuUs: (used.user + used.system) / count }
  } finally {
    db.close()
    for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true })
  }
}

compileBench()
const database = createSqliteDatabase()
try {
  console.log(`seeding ${orders.toLocaleString('en-US')} orders (1 in 10 with metadata) …`)
  await seed(database, orders, { pets: PETS, key: false, metadata: true })
  const seeded = database.url.slice('sqlite:'.length)
  const checkpoint = new Database(seeded)
  checkpoint.pragma('wal_checkpoint(TRUNCATE)')
  checkpoint.close()
  const layouts = Object.keys(LAYOUTS) as Layout[]
  const results = new Map<Layout, { wallUs: number; cpuUs: number }[]>(layouts.map((layout) => [layout, []]))
  for (let round = 1; round <= rounds; round++) {
    // Each round in another order, so that no layout always runs first (or last) on a warming machine.
    for (let i = 0; i < layouts.length; i++) {
      const layout = layouts[(i + round) % layouts.length]!
      results.get(layout)!.push(run(seeded, layout))
    }
    console.log(`round ${round} of ${rounds} done`)
  }
  const plain = { wall: median(results.get('plain')!.map((r) => r.wallUs)), cpu: median(results.get('plain')!.map((r) => r.cpuUs)) }
  console.log(`\n${places.toLocaleString('en-US')} places a run in transactions of ${BATCH}, into ${orders.toLocaleString('en-US')} orders; medians of ${rounds} rounds`)
  console.log('layout       wall µs a place   CPU µs a place')
  for (const [layout, runs] of results) {
    const wall = median(runs.map((r) => r.wallUs))
    const cpu = median(runs.map((r) => r.cpuUs))
    console.log(`${layout.padEnd(12)} ${wall.toFixed(1).padStart(6)} (${(wall / plain.wall).toFixed(2)}×)   ${cpu.toFixed(1).padStart(6)} (${(cpu / plain.cpu).toFixed(2)}×)`)
  }
} finally {
  await dropAllDatabases()
}
