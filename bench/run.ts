/**
 * `npm run bench`: the performance comparisons of docs/benchmarks.md, each in one run, with ratios.
 *
 *   npm run bench                        everything, SQLite then PostgreSQL (~15 minutes, 2 cores, plus the soak)
 *   npm run bench -- --only list-stream  one comparison (repeat --only, or separate names by commas)
 *   BENCH_ORDERS=100000 npm run bench    a smaller data set (default 1,000,000 orders)
 *   BENCH_POSTGRES=0 npm run bench       SQLite only
 *   BENCH_STRICT=1 npm run bench         exit 1 when a target is missed (errors always exit 1)
 *   SOAK_SECONDS=30 npm run bench -- --only soak   a shorter soak (default 180 s; SOAK_ORDERS, default 20000)
 *   TRACING_ROUNDS=1 TRACING_SECONDS=1 npm run bench -- --only tracing   a smoke run of the tracing comparison
 *   TRACING_RATIO=0.1 npm run bench -- --only tracing   the tracing comparison with 10% of traces sampled (0: none)
 *
 * Every server under test is a child process on 127.0.0.1 running compiled JavaScript under plain
 * node; the load comes from this process (autocannon) and from a separate downloader process. A
 * ratio target is judged on the median of paired rounds and shown with its range (lib/report.ts).
 * Results are printed as each comparison ends, then summarized and saved to .bench/results.md.
 */
import { cpus, totalmem } from 'node:os'
import { join } from 'node:path'
import { Downloader } from './lib/client.js'
import { dropAllDatabases, postgresUnavailable, type StoreKind } from './lib/databases.js'
import { positiveInteger } from './lib/env.js'
import { describeForeignLoad, ForeignCpu, waitForQuiet } from './lib/machine.js'
import { compileBench } from './lib/compile.js'
import { ROOT } from './lib/paths.js'
import { killAllChildren } from './lib/processes.js'
import { Report } from './lib/report.js'
import { cancels } from './suites/cancels.js'
import { compression } from './suites/compression.js'
import { events } from './suites/events.js'
import type { StoreContext } from './suites/context.js'
import { importOrders } from './suites/import.js'
import { listCached } from './suites/list-cached.js'
import { listStream } from './suites/list-stream.js'
import { metadataPages } from './suites/metadata-pages.js'
import { pages } from './suites/pages.js'
import { places } from './suites/places.js'
import { smallRequests } from './suites/small-requests.js'
import { soak } from './suites/soak.js'
import { tracing } from './suites/tracing.js'
import { updates } from './suites/updates.js'
import { webhooks } from './suites/webhooks.js'

/** In the order they run: the cancels (also those of events and webhooks) and the places change the data set, so they come last; tracing and the soak have a database of their own. */
const SUITES: Record<string, (context: StoreContext) => Promise<void>> = {
  import: importOrders,
  'list-stream': listStream,
  'list-cached': listCached,
  compression,
  small: smallRequests,
  pages,
  'metadata-pages': metadataPages,
  events,
  cancel: cancels,
  place: places,
  update: updates,
  tracing,
  webhooks,
  soak,
}

function parseArguments(argv: string[]): string[] {
  const only: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--only') only.push(...(argv[++i] ?? '').split(','))
    else if (arg.startsWith('--only=')) only.push(...arg.slice('--only='.length).split(','))
    else if (arg === '--help' || arg === '-h') {
      console.log(`usage: npm run bench [-- --only <${Object.keys(SUITES).join('|')}>[,…]]\nenv: BENCH_ORDERS (default 1000000), BENCH_POSTGRES=0, BENCH_STRICT=1, SOAK_SECONDS (default 180), SOAK_ORDERS (default 20000), TRACING_ROUNDS and TRACING_SECONDS (a short tracing run), TRACING_RATIO (sample that share of traces, not every request; 0: none)`)
      process.exit(0)
    } else throw new Error(`unknown argument "${arg}" (try --help)`)
  }
  for (const name of only) if (!(name in SUITES)) throw new Error(`unknown bench "${name}" (known: ${Object.keys(SUITES).join(', ')})`)
  return only.length === 0 ? Object.keys(SUITES) : Object.keys(SUITES).filter((name) => only.includes(name))
}

async function main(): Promise<number> {
  const selected = parseArguments(process.argv.slice(2))
  const orders = positiveInteger('BENCH_ORDERS') ?? 1_000_000
  const stores: StoreKind[] = process.env.BENCH_POSTGRES === '0' ? ['sqlite'] : process.env.BENCH_SQLITE === '0' ? ['postgres'] : ['sqlite', 'postgres']
  const machine = `${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'}), ${(totalmem() / 1024 ** 3).toFixed(0)} GiB, Node ${process.version}`
  const header = `# Benchmark results\n\n${new Date().toISOString()} — ${machine}\n\nBENCH_ORDERS=${orders}; benches: ${selected.join(', ')}; stores: ${stores.join(', ')}`
  console.log(header)
  compileBench()

  const report = new Report()
  const downloader = await Downloader.start()
  let failures = 0
  const busy: string[] = []
  try {
    for (const kind of stores) {
      const label = kind === 'sqlite' ? 'SQLite' : 'PostgreSQL'
      console.log(`\n## ${label}`)
      if (kind === 'postgres') {
        const reason = await postgresUnavailable()
        if (reason !== undefined) {
          console.log(`skipped: ${reason}`)
          continue
        }
      }
      const context: StoreContext = { kind, label, orders, report, downloader }
      try {
        for (const name of selected) {
          console.log(`\n[${label}] ${name} …`)
          await waitForQuiet()
          const started = Date.now()
          const sections = report.sections.length
          const foreign = new ForeignCpu()
          try {
            await SUITES[name]!(context)
            const load = foreign.stop()
            if (load > 0.1) busy.push(`${label} ${name}`)
            for (const section of report.sections.slice(sections)) section.notes.push(describeForeignLoad(load))
          } catch (error) {
            foreign.stop()
            failures++
            // A comparison that failed half-way reports its error, not half a table.
            report.sections.splice(sections)
            console.error(`[${label}] ${name} FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
            const section = report.section(name, label, '')
            section.rows.push({ measure: 'the bench itself', project: String(error instanceof Error ? error.message : error).split('\n')[0]!, result: 'ERROR' })
          }
          for (const section of report.sections.slice(sections)) report.print(section)
          console.log(`[${label}] ${name} took ${((Date.now() - started) / 1000).toFixed(0)} s`)
        }
      } finally {
        await context.big?.database.drop()
      }
    }
  } finally {
    await downloader.close()
  }

  const busyNote = busy.length === 0 ? '' : `\nWARNING: other processes used this machine's CPU during: ${busy.join('; ')}. Those figures are unreliable; run again on a quiet machine.\n`
  console.log(`\n## Summary\n\n${report.summary()}\n${busyNote}`)
  const saved = join(ROOT, '.bench', 'results.md')
  report.save(saved, header + busyNote)
  console.log(`(saved to ${saved})`)
  const verdicts = report.verdicts()
  const missed = verdicts.filter((v) => v === 'MISS').length
  console.log(`${verdicts.filter((v) => v === 'PASS').length} passed, ${missed} missed, ${failures} failed`)
  return failures > 0 || (process.env.BENCH_STRICT === '1' && missed > 0) ? 1 : 0
}

process.on('exit', killAllChildren)
process.on('SIGINT', () => {
  killAllChildren()
  void dropAllDatabases().finally(() => process.exit(130))
})

main().then(
  async (code) => {
    await dropAllDatabases()
    process.exit(code)
  },
  async (error: unknown) => {
    console.error(error instanceof Error ? error.message : error)
    killAllChildren()
    await dropAllDatabases()
    process.exit(1)
  },
)
