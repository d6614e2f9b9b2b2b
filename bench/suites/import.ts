import { spawn } from 'node:child_process'
import { readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { BenchDatabase } from '../lib/databases.js'
import { ordersFile } from '../lib/orders-file.js'
import { BUILD_DIR, ROOT, WORK_DIR } from '../lib/paths.js'
import { fmt, median, pairedRounds, roundRatios, verdict, type Section } from '../lib/report.js'
import { createDatabase, type StoreContext } from './context.js'

/** Paired rounds against the peer (SQLite), or runs of the import alone (PostgreSQL), each on a fresh database. */
const ROUNDS = 3

/**
 * How much more the import's peak RSS may be than that of an import of half as many orders, and
 * still count as flat. Holding the orders (or anything per order) would cost well over 100 bytes
 * each, over 50 MiB for the 500,000 more of the default data set; what is left is the garbage
 * collector's and SQLite's page cache's slack.
 */
export const FLAT_BYTES = 64 * 1024 * 1024

const CLI = join(ROOT, 'bin', 'petstore-orders.js')
const PEER = join(BUILD_DIR, 'bench', 'baselines', 'import-file-peer.js')
const PEAK_RSS = pathToFileURL(join(BUILD_DIR, 'bench', 'lib', 'peak-rss-at-exit.js')).href

/** A whole program's run: its wall time from spawn to exit, and its peak RSS. */
interface ProgramRun {
  seconds: number
  peakRss: number
}

/**
 * Comparison 6: `petstore-orders orders import FILE` as a user runs it, timed from spawn to exit, on
 * the data set written as a JSON array (lib/orders-file.ts) into a freshly migrated database. Its
 * peak RSS against the same import of a file of half as many orders: memory that grew with the
 * orders would show there. On SQLite, in paired rounds against the straightforward peer of
 * baselines/import-file-peer.ts, timed the same way on the same file.
 */
export async function importOrders(context: StoreContext): Promise<void> {
  const file = await ordersFile(context.orders)
  // Half, not a tenth: V8's heap settles at its working size over the first few hundred thousand
  // orders (peak RSS 141 MiB at 100,000, 169 at 300,000, 222 at 1,000,000, 227 at 2,000,000), so a
  // tenth's peak says where V8 was, not whether memory grows with the orders.
  const smallCount = Math.max(1, Math.floor(context.orders / 2))
  const smallFile = await ordersFile(smallCount)
  const small = await fresh(context, (database) => run('import', CLI, ['orders', 'import', smallFile], database))

  const section = context.report.section('6. Import', context.label, context.kind === 'sqlite' ? 'the peer' : `${fmt.count(smallCount)} orders`)
  let project: ProgramRun[]
  if (context.kind === 'sqlite') {
    const rounds = await pairedRounds(
      ROUNDS,
      () => fresh(context, (database) => run('import peer', PEER, [file], database)),
      () => fresh(context, (database) => run('import', CLI, ['orders', 'import', file], database)),
    )
    project = rounds.project
    const ratios = roundRatios(rounds.project.map((r) => r.seconds), rounds.baseline.map((r) => r.seconds), (p, b) => b / p)
    section.rows.push({
      measure: `\`orders import\` of ${fmt.count(context.orders)} orders, spawn to exit, against the peer (${ROUNDS} paired rounds; > 1× is faster)`,
      project: seconds(rounds.project),
      baseline: `peer ${seconds(rounds.baseline)}, ${fmt.mib(Math.max(...rounds.baseline.map((r) => r.peakRss)))} peak`,
      ratio: fmt.rounds(ratios),
      target: '≥ 1×',
      result: verdict(ratios.median >= 1),
    })
    section.notes.push(
      `Per round (s): project ${rounds.project.map((r) => r.seconds.toFixed(2)).join(', ')}; peer ${rounds.baseline.map((r) => r.seconds.toFixed(2)).join(', ')}; ratios ${fmt.roundList(ratios)}.`,
    )
  } else {
    project = []
    for (let i = 0; i < ROUNDS; i++) project.push(await fresh(context, (database) => run('import', CLI, ['orders', 'import', file], database)))
  }
  const peak = Math.max(...project.map((r) => r.peakRss))
  const growth = Math.max(0, peak - small.peakRss)
  section.rows.push(
    {
      measure: `\`orders import\` of ${fmt.count(context.orders)} orders, spawn to exit (median of ${ROUNDS})`,
      project: seconds(project),
      baseline: `${fmt.count(smallCount)}: ${fmt.seconds(small.seconds)}`,
      ratio: fmt.rate(context.orders / median(project.map((r) => r.seconds)), 'orders/s'),
      target: '< 60 s',
      result: verdict(median(project.map((r) => r.seconds)) < 60),
    },
    {
      measure: 'importer peak RSS (ru_maxrss), against an import of half as many orders',
      project: fmt.mib(peak),
      baseline: fmt.mib(small.peakRss),
      ratio: `+${fmt.mib(growth)}`,
      target: `< +${fmt.mib(FLAT_BYTES)} (flat)`,
      result: verdict(growth < FLAT_BYTES),
    },
  )
  section.notes.push(
    `The file: ${fmt.mb(statSync(file).size)}, a JSON array. Each run starts on a database the project migrated just before (not timed); the whole process is timed, Node.js's start and the final commit included.`,
  )
  addSeedNote(section, context)
}

/** The data set the other comparisons use is still imported in-process (lib/seed.ts); its time, for reference. */
function addSeedNote(section: Section, context: StoreContext): void {
  if (context.big !== undefined) section.notes.push(`The other comparisons' data set was imported in-process in ${fmt.seconds(context.big.seed.importSeconds)}.`)
}

function seconds(runs: ProgramRun[]): string {
  return fmt.seconds(median(runs.map((r) => r.seconds)))
}

/** `work` on a database made and migrated for it, dropped afterwards. */
async function fresh<T>(context: StoreContext, work: (database: BenchDatabase) => Promise<T>): Promise<T> {
  const database = await createDatabase(context.kind)
  try {
    await run('migrate', CLI, ['migrate'], database)
    return await work(database)
  } finally {
    await database.drop()
  }
}

/** Runs `node script ...args` against `database` to its exit; fails on a non-zero exit. */
async function run(name: string, script: string, args: string[], database: BenchDatabase): Promise<ProgramRun> {
  const peakFile = join(WORK_DIR, `peak-rss-${process.pid}`)
  rmSync(peakFile, { force: true })
  const started = process.hrtime.bigint()
  const child = spawn(process.execPath, ['--import', PEAK_RSS, script, ...args], {
    env: { ...process.env, NODE_OPTIONS: '', DATABASE_URL: database.url, BENCH_PEAK_RSS_FILE: peakFile },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr = (stderr + text).slice(-4000)))
  const code = await new Promise<number | null>((resolve, reject) => child.on('error', reject).on('exit', (exitCode) => resolve(exitCode)))
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  if (code !== 0) throw new Error(`${name} exited with ${code}: ${stderr.trim()}`)
  return { seconds, peakRss: Number(readFileSync(peakFile, 'utf8')) }
}
