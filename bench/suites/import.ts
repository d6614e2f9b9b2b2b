import type { BenchDatabase } from '../lib/databases.js'
import { Child } from '../lib/processes.js'
import { fmt, pairedRounds, roundRatios, verdict } from '../lib/report.js'
import { bigDataset, createDatabase, seed, type StoreContext } from './context.js'

/** Paired rounds against the plain peer, each on fresh databases, of the whole data set. */
const PEER_ROUNDS = 3

/**
 * How much more the 10× bigger import's peak RSS may be and still count as flat. Holding the orders
 * (or anything per order) would cost well over 100 bytes each, over 90 MiB for the 900,000 more of
 * the default data set; what is left is the garbage collector's and SQLite's page cache's slack.
 */
export const FLAT_BYTES = 64 * 1024 * 1024

/**
 * Comparison 6: importing the big data set through the store's importOrders (one transaction, records
 * from a lazy generator, in a child process that samples its RSS), and a 10× smaller import on a
 * fresh database as the reference for "flat memory": if memory grew with the number of orders, the
 * big import's peak would be far above the small one's.
 */
export async function importOrders(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const smallCount = Math.max(1, Math.floor(context.orders / 10))
  const reference = await createDatabase(context.kind)
  const small = await seed(reference, smallCount, { pets: 0, key: false }).finally(() => reference.drop())

  const section = context.report.section('6. Import', context.label, `${fmt.count(smallCount)} orders`)
  const { seed: result } = big
  const peakRatio = result.peakRss / small.peakRss
  const growth = Math.max(0, result.peakRss - small.peakRss)
  const samples = result.rssSamples
  const rssAt = (fraction: number): string => fmt.mib(samples[Math.min(samples.length - 1, Math.floor(samples.length * fraction))]![1])
  section.rows.push(
    {
      measure: `import ${fmt.count(big.orders)} orders (one transaction)`,
      project: fmt.seconds(result.importSeconds),
      baseline: fmt.seconds(small.importSeconds),
      ratio: fmt.rate(big.orders / result.importSeconds, 'orders/s'),
      target: '< 60 s',
      result: verdict(result.importSeconds < 60),
    },
    {
      measure: 'importer peak RSS (VmHWM)',
      project: fmt.mib(result.peakRss),
      baseline: fmt.mib(small.peakRss),
      ratio: `+${fmt.mib(growth)} (${fmt.ratio(peakRatio)})`,
      target: `< +${fmt.mib(FLAT_BYTES)} (flat)`,
      result: verdict(growth < FLAT_BYTES),
    },
  )
  if (samples.length >= 10) {
    section.rows.push({ measure: 'importer RSS at 10% → 50% → 100%', project: `${rssAt(0.1)} → ${rssAt(0.5)} → ${rssAt(1)}`, result: 'info' })
  }
  section.notes.push(
    `Records come from a generator (no parsing); the time is importOrders alone (migration, pets and key excluded). The importer is a process of its own: its RSS includes Node.js itself (${fmt.mib(result.rssBefore)} before the import).`,
  )
  if (context.kind === 'sqlite') await againstPeer(context, section)
}

/**
 * The project's import against a plain better-sqlite3 program that inserts each order and its event
 * row by row in one transaction (baselines/import-peer.ts), in paired rounds on fresh databases:
 * order records per second, project over peer (≥ 1× is as fast).
 */
async function againstPeer(context: StoreContext, section: ReturnType<StoreContext['report']['section']>): Promise<void> {
  const orders = context.orders
  const fresh = async <T>(run: (database: BenchDatabase) => Promise<T>): Promise<T> => {
    const database = await createDatabase(context.kind)
    try {
      return await run(database)
    } finally {
      await database.drop()
    }
  }
  const { baseline, project } = await pairedRounds(
    PEER_ROUNDS,
    () =>
      fresh(async (database) => {
        const child = new Child('import peer', 'baselines/import-peer.ts', { env: { DATABASE_URL: database.url }, args: [String(orders)] })
        try {
          return (await child.next<{ type: 'imported'; importSeconds: number }>('imported', 600_000)).importSeconds
        } finally {
          await child.exited
        }
      }),
    () => fresh(async (database) => (await seed(database, orders, { pets: 0, key: false })).importSeconds),
  )
  // Rates: the peer's seconds over the project's.
  const ratios = roundRatios(project, baseline, (p, b) => b / p)
  const rate = (seconds: number[]): string => fmt.rate(orders / [...seconds].sort((a, b) => a - b)[Math.floor(seconds.length / 2)]!, 'orders/s')
  section.rows.push({
    measure: `import ${fmt.count(orders)} orders, against a plain row-by-row peer (${PEER_ROUNDS} paired rounds)`,
    project: rate(project),
    baseline: `peer ${rate(baseline)}`,
    ratio: fmt.rounds(ratios),
    target: '≥ 1×',
    result: verdict(ratios.median >= 1),
  })
  section.notes.push(
    `Against the peer, per round (s): project ${project.map((s) => s.toFixed(2)).join(', ')}; peer ${baseline.map((s) => s.toFixed(2)).join(', ')}; ratios ${fmt.roundList(ratios)}.`,
  )
}
