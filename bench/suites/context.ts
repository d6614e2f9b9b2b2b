import { Child } from '../lib/processes.js'
import type { Downloader } from '../lib/client.js'
import type { BenchDatabase, StoreKind } from '../lib/databases.js'
import { createPostgresDatabase, createSqliteDatabase } from '../lib/databases.js'
import { PendingIds, PETS } from '../lib/dataset.js'
import type { Report } from '../lib/report.js'
import type { SeedResult } from '../lib/seed.js'

/** The big data set of one store, shared by the list and cancel benches. */
export interface BigDataset {
  database: BenchDatabase
  secret: string
  orders: number
  pending: PendingIds
  seed: SeedResult
}

export interface StoreContext {
  kind: StoreKind
  label: string
  /** BENCH_ORDERS: size of the big data set. */
  orders: number
  report: Report
  downloader: Downloader
  big?: BigDataset
}

export async function createDatabase(kind: StoreKind): Promise<BenchDatabase> {
  return kind === 'sqlite' ? createSqliteDatabase() : createPostgresDatabase()
}

/**
 * Migrates `database` and imports `orders` orders (and the pets) through the store, in a child
 * process; with `metadata`, the metadata data set's orders (lib/dataset.ts); with `build`, by another
 * tree's seeder and store (lib/reference.ts).
 */
export async function seed(
  database: BenchDatabase,
  orders: number,
  options: { pets: number; key: boolean; metadata?: boolean; build?: string },
): Promise<SeedResult> {
  const child = new Child('seeder', 'lib/seed.ts', {
    build: options.build,
    env: { DATABASE_URL: database.url },
    args: [String(orders), String(options.pets), options.key ? '1' : '0', options.metadata === true ? '1' : '0'],
  })
  try {
    return await child.next<SeedResult & { type: 'seeded' }>('seeded', 600_000)
  } finally {
    await child.exited
  }
}

/** The big data set, made on first use: it is also comparison 6's measurement (see import.ts). */
export async function bigDataset(context: StoreContext): Promise<BigDataset> {
  if (context.big !== undefined) return context.big
  const database = await createDatabase(context.kind)
  try {
    console.log(`  importing ${context.orders.toLocaleString('en-US')} orders into ${context.label} …`)
    const result = await seed(database, context.orders, { pets: PETS, key: true })
    console.log(`  imported in ${result.importSeconds.toFixed(1)} s`)
    context.big = { database, secret: result.secret!, orders: context.orders, pending: new PendingIds(context.orders), seed: result }
    return context.big
  } catch (error) {
    await database.drop()
    throw error
  }
}

/**
 * Cancels one pending order through the API: the data version changes, so the next list request
 * is a cache miss that streams from the database, as after any change.
 */
export async function bumpVersion(context: StoreContext, origin: string): Promise<void> {
  const big = context.big!
  const [id] = big.pending.take(1)
  if (id === undefined) throw new Error('no pending order left to cancel')
  await context.downloader.request(`${origin}/v1/store/orders/${id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${big.secret}` },
    expect: 204,
  })
}
