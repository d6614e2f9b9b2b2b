import { bearer } from '../lib/client.js'
import type { BenchDatabase } from '../lib/databases.js'
import type { WalkResult } from '../lib/downloader.js'
import { cpuSeconds } from '../lib/proc.js'
import { PROJECT_ENV, startServerChild, type RunningChild } from '../lib/processes.js'
import { fmt, median, pairedRounds, roundRatios, verdict } from '../lib/report.js'
import { cancelRun, CONNECTIONS, WARMUP_CANCELS, type CancelRun } from './cancels.js'
import { bigDataset, bumpVersion, type StoreContext } from './context.js'
import { FLAT_BYTES } from './import.js'

/** The outbox table of the order event feed (src/store/*\/migrations.ts). */
const EVENTS_TABLE = 'order_events'

/** Paired rounds of the drain against one v1 full list (cache miss). */
const DRAIN_ROUNDS = 5
const DRAIN_PAGE = 1000
/** Every event of a page has this text once: its type (the order inside has no `type`). */
const EVENT_MARKER = '"type":"order.'

/** Paired rounds of cancels with the outbox against cancels whose event insert is skipped. */
const CANCEL_ROUNDS = 7
/** Measured cancels per run: at most this, a share of the pending orders left, and MAX_SECONDS. */
const CANCELS_PER_RUN = 20_000
/** What the outbox rounds may use of the pending orders left; the cancel comparison (5) shares the rest. */
const CANCEL_SHARE = 0.4
const MAX_SECONDS = 5

/** The import's memory is judged from this fraction of it on: its peak so far against its final peak. */
const EARLY = 0.25

/**
 * Bench-only SQL that makes every INSERT into the outbox a no-op, leaving the server's code path as
 * it is: a BEFORE ROW trigger that skips the row. (A PostgreSQL rule would not apply inside the
 * WITH statement of a cancel batch.) Installed while no server runs, removed after the run.
 */
const SKIP_EVENTS = {
  sqlite: {
    install: `CREATE TRIGGER bench_skip_order_event BEFORE INSERT ON ${EVENTS_TABLE} BEGIN SELECT RAISE(IGNORE); END;`,
    remove: 'DROP TRIGGER IF EXISTS bench_skip_order_event;',
  },
  postgres: {
    install: `CREATE FUNCTION bench_skip_order_event() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
      CREATE TRIGGER bench_skip_order_event BEFORE INSERT ON ${EVENTS_TABLE} FOR EACH ROW EXECUTE FUNCTION bench_skip_order_event()`,
    remove: `DROP TRIGGER IF EXISTS bench_skip_order_event ON ${EVENTS_TABLE}; DROP FUNCTION IF EXISTS bench_skip_order_event()`,
  },
}

/** Events of `type` in the outbox for the orders `from`…`to`. */
function countEvents(database: BenchDatabase, type: string, from?: number, to?: number): Promise<number> {
  const p = database.kind === 'sqlite' ? ['?', '?', '?'] : ['$1', '$2', '$3']
  if (from === undefined || to === undefined) return database.count(`SELECT count(*) FROM ${EVENTS_TABLE} WHERE type = ${p[0]}`, [type])
  return database.count(`SELECT count(*) FROM ${EVENTS_TABLE} WHERE type = ${p[0]} AND order_id BETWEEN ${p[1]} AND ${p[2]}`, [type, from, to])
}

/**
 * Comparison 8, the order event feed's cost (docs/order-events.md, docs/benchmarks.md):
 * - the big data set's import, which writes one `order.created` event per new order in its
 *   transaction: its time (the import of comparison 6, measured once) and the importer's RSS during
 *   it, whose peak must not grow with the number of orders;
 * - draining every event from the start in pages of 1,000 (GET /v2/store/order-events, following
 *   `nextCursor` until a page is empty) against one v1 full list that is a cache miss, in paired
 *   rounds, on the wire; target ≤ 5×, as the v2 walk's (each page is one statement, read when it is
 *   asked for);
 * - durable cancels (comparison 5's load) with the outbox against the same server on the same
 *   database with the event insert skipped by a bench-only trigger, in paired rounds; target ≥ 0.9×.
 */
export async function events(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const section = context.report.section('8. Order events', context.label, 'without events / v1 list')

  // The import.
  const created = await countEvents(big.database, 'order.created')
  if (created !== big.orders) throw new Error(`the import wrote ${created} order.created events for ${big.orders} new orders`)
  const { seed } = big
  const samples = seed.rssSamples
  const early = samples.filter(([count]) => count <= big.orders * EARLY)
  const peakOf = (part: [number, number][]): number => Math.max(...part.map(([, rss]) => rss))
  const earlyPeak = early.length > 0 ? peakOf(early) : seed.rssBefore
  const samplePeak = samples.length > 0 ? peakOf(samples) : seed.rssBefore
  const growth = samplePeak - earlyPeak
  section.rows.push(
    {
      measure: `import ${fmt.count(big.orders)} orders and their ${fmt.count(created)} events (one transaction)`,
      project: fmt.seconds(seed.importSeconds),
      ratio: fmt.rate(big.orders / seed.importSeconds, 'orders/s'),
      target: '< 60 s',
      result: verdict(seed.importSeconds < 60),
    },
    {
      measure: `importer RSS: peak over the first ${EARLY * 100}% → over all of it`,
      project: `${fmt.mib(earlyPeak)} → ${fmt.mib(samplePeak)}`,
      ratio: `${growth >= 0 ? '+' : '−'}${fmt.mib(Math.abs(growth))}`,
      target: `< +${fmt.mib(FLAT_BYTES)} (flat)`,
      result: verdict(growth < FLAT_BYTES),
    },
    {
      measure: `importer CPU time during the import (user + system${context.kind === 'postgres' ? ', the client side' : ''})`,
      project: fmt.seconds(seed.importCpuSeconds),
      ratio: `${Math.round((100 * seed.importCpuSeconds) / seed.importSeconds)}% of its wall time`,
      result: 'info',
    },
    {
      measure: 'importer RSS: before the import, peak (VmHWM)',
      project: `${fmt.mib(seed.rssBefore)}, ${fmt.mib(seed.peakRss)}`,
      ratio: `+${fmt.mib(seed.peakRss - seed.rssBefore)}`,
      result: 'info',
    },
  )
  section.notes.push(
    `Import: the big data set's, timed around store.orders.import alone in a process of its own (comparison 6's measurement, made once). Its RSS is sampled every 10,000 orders (${fmt.count(samples.length)} samples); ` +
      `if anything were kept per order or per event, the peak over the whole import would be well above the peak over its first ${EARLY * 100}% (over ${fmt.mib(100 * big.orders * (1 - EARLY))} at 100 bytes each).`,
  )

  await drain(context, section)
  await outboxCancels(context, section)
}

type Section = ReturnType<StoreContext['report']['section']>

/** Every event from the start, in pages of DRAIN_PAGE, against one v1 full list (cache miss), in paired rounds. */
async function drain(context: StoreContext, section: Section): Promise<void> {
  const big = context.big!
  const { downloader } = context
  const env = { DATABASE_URL: big.database.url, ...PROJECT_ENV }
  const headers = bearer(big.secret)
  // The feed's server is one of its own, which no v1 list reaches: its peak is the drains' alone.
  const feed = await startServerChild('project server (event feed)', 'lib/project-server.ts', env)
  const servers: { v1?: RunningChild } = {}
  try {
    const idleRss = feed.child.memory().rss
    const v1 = (servers.v1 = await startServerChild('project server (v1 list)', 'lib/project-server.ts', env))
    // Untimed first, on each side, as on a server that has been serving: a drain, which counts the
    // events (every one stored must be in it), and a v1 list that is a cache miss. The timed drains
    // then read bytes, as the v1 lists do.
    const walk = await downloader.walk(`${feed.url}/v2/store/order-events?limit=${DRAIN_PAGE}`, { headers, param: 'after', itemMarker: EVENT_MARKER })
    const stored = await big.database.count(`SELECT count(*) FROM ${EVENTS_TABLE}`)
    if (walk.items !== stored) throw new Error(`a drain read ${walk.items} events of the ${stored} stored`)
    await bumpVersion(context, v1.url)
    await downloader.request(`${v1.url}/v1/store/orders`, { headers })
    // Each side's server CPU time too: the work a drain costs, which a busy machine does not inflate as it does wall time.
    const rounds = await pairedRounds(
      DRAIN_ROUNDS,
      async () => {
        await bumpVersion(context, v1.url)
        const cpu = cpuSeconds(v1.child.pid)
        const list = await downloader.request(`${v1.url}/v1/store/orders`, { headers })
        return { ms: list.ms, bytes: list.bytes, cpu: cpuSeconds(v1.child.pid) - cpu }
      },
      async (): Promise<WalkResult & { cpu: number }> => {
        const cpu = cpuSeconds(feed.child.pid)
        const walk = await downloader.walk(`${feed.url}/v2/store/order-events?limit=${DRAIN_PAGE}`, { headers, param: 'after' })
        return { ...walk, cpu: cpuSeconds(feed.child.pid) - cpu }
      },
    )
    // Each timed drain read every page the counted one did (and the events the v1 rounds' cancels added).
    const short = rounds.project.find((w) => w.pages < walk.pages || w.bytes < walk.bytes)
    if (short !== undefined) throw new Error(`a timed drain read ${short.pages} pages, ${short.bytes} bytes: fewer than the counted one's ${walk.pages}, ${walk.bytes}`)
    const peakRss = feed.child.memory().peakRss
    const ratios = roundRatios(
      rounds.project.map((walk) => walk.ms),
      rounds.baseline.map((list) => list.ms),
    )
    const drainMs = median(rounds.project.map((w) => w.ms))
    section.rows.push(
      {
        measure: `drain every event, pages of ${fmt.count(DRAIN_PAGE)} (${DRAIN_ROUNDS} paired rounds)`,
        project: fmt.ms(drainMs),
        baseline: fmt.ms(median(rounds.baseline.map((list) => list.ms))),
        ratio: fmt.rounds(ratios),
        target: '≤ 5×',
        result: verdict(ratios.median <= 5),
      },
      {
        measure: 'drain: events (counted by the untimed drain: every one stored), pages and bytes on the wire',
        project: `${fmt.count(walk.items)} events, ${fmt.count(walk.pages)} pages, ${fmt.mb(walk.bytes)}`,
        baseline: fmt.mb(rounds.baseline.at(-1)!.bytes),
        ratio: fmt.rate(walk.items / (drainMs / 1000), 'events/s'),
        result: 'info',
      },
      {
        measure: 'drain: server CPU time (user + system), median',
        project: fmt.ms(1000 * median(rounds.project.map((w) => w.cpu))),
        baseline: fmt.ms(1000 * median(rounds.baseline.map((l) => l.cpu))),
        ratio: fmt.ratio(median(rounds.project.map((w) => w.cpu)) / median(rounds.baseline.map((l) => l.cpu))),
        result: 'info',
      },
      {
        measure: 'feed server peak RSS (VmHWM) over the drains, vs idle',
        project: fmt.mib(peakRss),
        baseline: `${fmt.mib(idleRss)} idle`,
        ratio: `+${fmt.mib(peakRss - idleRss)}`,
        result: 'info',
      },
    )
    section.notes.push(
      `Drain: GET /v2/store/order-events?limit=${DRAIN_PAGE} from the oldest event, then with after=<nextCursor> until a page is empty, on one keep-alive connection of the downloader process, each page read to its last byte and not parsed (its nextCursor read from its end). Before the rounds, untimed: one drain, which counts the events in the pages' bytes, and one v1 list (cache miss), so that both servers are warm, as in service. ` +
        `Each v1 list follows a cancel through the API, so it is a cache miss streamed from the database (and the next drain has one event more). Per round (ms): drain ${rounds.project.map((w) => w.ms.toFixed(0)).join(', ')}; v1 list ${rounds.baseline.map((l) => l.ms.toFixed(0)).join(', ')}; ratios ${fmt.roundList(ratios)}.`,
    )
  } finally {
    await servers.v1?.child.stop()
    await feed.child.stop()
  }
}

/**
 * Comparison 5's load (50 clients DELETEing distinct pending orders) on fresh project servers, with
 * the outbox and with its insert skipped by SKIP_EVENTS, in paired rounds. Both are the same server
 * code on the same database: the only difference is the event row.
 */
async function outboxCancels(context: StoreContext, section: Section): Promise<void> {
  const big = context.big!
  const skip = SKIP_EVENTS[context.kind]
  const perRun = Math.min(CANCELS_PER_RUN, Math.floor((big.pending.remaining() * CANCEL_SHARE) / (2 * CANCEL_ROUNDS)) - WARMUP_CANCELS - 2 * CONNECTIONS)
  const script = 'lib/project-server.ts'
  const withEvents: { run: CancelRun; events: number }[] = []
  const withoutEvents: { run: CancelRun; events: number }[] = []
  await pairedRounds(
    CANCEL_ROUNDS,
    async () => {
      await big.database.execute(skip.install)
      try {
        const run = await cancelRun(context, 'project server, event insert skipped', script, perRun, {}, MAX_SECONDS)
        withoutEvents.push({ run, events: await countEvents(big.database, 'order.cancelled', run.firstId, run.lastId) })
      } finally {
        await big.database.execute(skip.remove)
      }
    },
    async () => {
      const run = await cancelRun(context, 'project server', script, perRun, {}, MAX_SECONDS)
      withEvents.push({ run, events: await countEvents(big.database, 'order.cancelled', run.firstId, run.lastId) })
    },
  )
  const project = withEvents.map((r) => r.run)
  const baseline = withoutEvents.map((r) => r.run)
  const ratios = roundRatios(
    project.map((r) => r.perSecond),
    baseline.map((r) => r.perSecond),
  )
  const rate = (runs: CancelRun[]): string => fmt.rate(median(runs.map((r) => r.perSecond)), 'cancels/s')
  const cpu = (r: CancelRun): string => `${Math.round(r.cpu.server! * 100)}% / ${Math.round(r.cpu.client! * 100)}%`
  const total = (runs: CancelRun[], of: (r: CancelRun) => number): number => runs.reduce((sum, r) => sum + of(r), 0)
  const eventsOk = withEvents.every((r) => r.events >= r.run.ok) && withoutEvents.every((r) => r.events === 0)
  const durable = [...project, ...baseline].every((r) => r.durable >= r.ok)
  section.rows.push(
    {
      measure: `durable cancels per second (204), ${CONNECTIONS} clients, ${CANCEL_ROUNDS} paired rounds`,
      project: rate(project),
      baseline: rate(baseline),
      ratio: fmt.rounds(ratios),
      target: '≥ 0.9×',
      result: verdict(ratios.median >= 0.9),
    },
    {
      measure: 'cancels: latency p50 / p99 (last round)',
      project: `${project.at(-1)!.p50Ms} / ${project.at(-1)!.p99Ms} ms`,
      baseline: `${baseline.at(-1)!.p50Ms} / ${baseline.at(-1)!.p99Ms} ms`,
      result: 'info',
    },
    { measure: 'cancels: CPU of server / load generator (of one core, last round)', project: cpu(project.at(-1)!), baseline: cpu(baseline.at(-1)!), result: 'info' },
    {
      measure: 'cancels: after SIGKILL, orders cancelled and order.cancelled events of the acknowledged cancels',
      project: `${fmt.count(total(project, (r) => r.durable))} and ${fmt.count(withEvents.reduce((sum, r) => sum + r.events, 0))} of ${fmt.count(total(project, (r) => r.ok))}`,
      baseline: `${fmt.count(total(baseline, (r) => r.durable))} and ${fmt.count(withoutEvents.reduce((sum, r) => sum + r.events, 0))} of ${fmt.count(total(baseline, (r) => r.ok))}`,
      target: 'all and all / all and none',
      result: verdict(durable && eventsOk),
    },
  )
  const runs = (results: CancelRun[]): string => results.map((r) => `${fmt.count(r.requests)} in ${r.seconds.toFixed(2)} s`).join(', ')
  section.notes.push(
    `Cancels: comparison 5's load on a fresh project server per run (${fmt.count(WARMUP_CANCELS)} warm-up cancels, then up to ${fmt.count(perRun)} measured or ${MAX_SECONDS} s, then SIGKILL). ` +
      `The baseline is the same server on the same database with a bench-only BEFORE INSERT trigger on ${EVENTS_TABLE} that skips every row (${context.kind === 'sqlite' ? 'RAISE(IGNORE)' : 'a row trigger returning NULL'}), installed before its run and dropped after: the same statements, less the event rows. ` +
      `Runs: with events ${runs(project)}; without ${runs(baseline)}; ratios ${fmt.roundList(ratios)}.`,
  )
}
