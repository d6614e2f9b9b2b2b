import { setTimeout as sleep } from 'node:timers/promises'
import { bearer } from '../lib/client.js'
import { PETS } from '../lib/dataset.js'
import { positiveInteger } from '../lib/env.js'
import { closedLoop, placeLoad, requireAllOk, type LoadResult } from '../lib/load.js'
import type { SinkStats } from '../lib/otlp-sink.js'
import { PROJECT_ENV, startServerChild, type RunningChild } from '../lib/processes.js'
import { cpuDuring } from '../lib/proc.js'
import type { BenchDatabase } from '../lib/databases.js'
import { referenceBuild } from '../lib/reference.js'
import { fmt, interleavedRounds, median, pairedRounds, roundRatios, verdict, type RoundRatios, type Verdict } from '../lib/report.js'
import { createDatabase, seed, type StoreContext } from './context.js'

/** As in small-requests.ts: the v1 list is then the 98 orders not cancelled, 8,893 bytes. */
const ORDERS = 100
/** The v2 order read: one of the seeded orders (pending), a database read per request. */
const ORDER_ID = 42
const GET_CONNECTIONS = 10
/**
 * Twelve: on a quiet host (2026-12-06) six rounds' ratios spread from 0.63× to 1.40×, and their
 * median moved by more between two runs of the same code than the targets tell apart (0.95×, 0.9×).
 */
const GET_ROUNDS = 12
const GET_SECONDS = 3
const GET_WARMUP_SECONDS = 1
/**
 * Before a path's rounds, each of its servers answers it for this long, uncounted. With 10% sampled
 * the SDK's recording path runs a tenth as often, so V8 takes ten times as long to optimise it: in
 * bench/profile-spans.ts's loop (`WINDOWS`), a sampled request at 10% cost 67–88 µs in the first 9
 * seconds and ~30 µs from the 15th on, against 18–28 µs throughout with every request sampled.
 * Rounds started sooner measured that warm-up, which a server running for hours never sees.
 */
const GET_PREWARM_SECONDS = 15
/** As in places.ts. */
const PLACE_CONNECTIONS = 50
const PLACE_ROUNDS = 5
const WARMUP_PLACES = 1_000
const PLACES = 60_000
const PLACE_MAX_SECONDS = 10
/** Places, whatever is sampled. */
const PLACE_TARGET = 0.85
/**
 * The small GETs: with nothing sampled, tracing costs what a sampler's decision costs; with 10% it
 * costs about a tenth of a traced request. With every request sampled their rate is reported, and
 * what is judged is the server's CPU each request adds on the v1 list: no more than it added when
 * ~25 µs were measured from the outside on 2026-12-04 (Node 20, 22,087/s → 14,297/s).
 */
const GET_TARGET_NONE = 0.95
const GET_TARGET_SOME = 0.9
const ADDED_CPU_MEASURED_US = 25
/**
 * With every request sampled, the yardstick of those ~25 µs: main as it stood at the close of
 * 2026-12-04, built beside this tree (lib/reference.ts) and measured in the same rounds, traced and
 * not, so that the target (add no more CPU than then) is judged on one host at one time rather than
 * against a figure another machine gave on another day. TRACING_REFERENCE names another commit, or
 * `none` to leave it out (a clone without that history).
 */
const REFERENCE_COMMIT = '06a287698aa56339befc3512693044e626bc8abe'

/**
 * Every OTEL_* variable the project's config and the SDK's sampler read, so that the bench's own
 * environment turns tracing neither on nor off: tracing is off unless the traced env sets them.
 */
export const TRACING_OFF: Record<string, string> = {
  OTEL_SDK_DISABLED: '',
  OTEL_TRACES_EXPORTER: '',
  OTEL_EXPORTER_OTLP_ENDPOINT: '',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
  OTEL_EXPORTER_OTLP_PROTOCOL: '',
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: '',
  OTEL_TRACES_SAMPLER: '',
  OTEL_TRACES_SAMPLER_ARG: '',
}

/**
 * What is sampled: every request (`always_on`: the CPU each request's tracing adds is judged) unless
 * TRACING_RATIO asks for the share of traces an operator would keep (`parentbased_traceidratio`),
 * or 0 for none (`always_off`: what tracing costs before any span is recorded), for
 * docs/production.md's account of the cost.
 */
function sampling(): { env: Record<string, string>; label: string; none: boolean; getTarget?: number; reference?: string } {
  const ratio = process.env.TRACING_RATIO
  if (ratio === undefined || ratio === '') {
    const named = process.env.TRACING_REFERENCE
    const reference = named === 'none' ? undefined : named === undefined || named === '' ? REFERENCE_COMMIT : named
    return { env: { OTEL_TRACES_SAMPLER: 'always_on' }, label: 'every request sampled', none: false, reference }
  }
  if (!/^(0|0?\.[0-9]+)$/.test(ratio)) throw new Error(`TRACING_RATIO must be 0 or a ratio below 1, such as 0.1, got "${ratio}"`)
  if (Number(ratio) === 0) return { env: { OTEL_TRACES_SAMPLER: 'always_off' }, label: 'nothing sampled', none: true, getTarget: GET_TARGET_NONE }
  return {
    env: ratioSampler(ratio),
    label: `${Number(ratio) * 100}% of traces sampled`,
    none: false,
    getTarget: GET_TARGET_SOME,
  }
}

/** The SDK's sampler variables for `parentbased_traceidratio` at `ratio`: that share of the traces that start here, and what the caller decided for the others. */
export function ratioSampler(ratio: string): Record<string, string> {
  return { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio }
}

/** The ratios a profiling tool adds to its settings: `RATIOS`, comma-separated (e.g. 0.01,0.1); none by default. */
export function ratiosToProfile(): string[] {
  return (process.env.RATIOS ?? '').split(',').filter((ratio) => ratio !== '')
}

export function tracingOn(sinkUrl: string, sampler: Record<string, string>): Record<string, string> {
  return {
    ...TRACING_OFF,
    OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    ...sampler,
    OTEL_SERVICE_NAME: 'petstore-orders-bench',
  }
}

interface Run extends LoadResult {
  /** CPU of the server, the load generator and the OTLP sink during the run (a GET's warm-up included), as shares of one core. */
  cpu: Record<string, number>
  /** The server's CPU time per request answered in that time, in µs. */
  serverUs: number
}

/** What the sink received from one traced server (or run), and the requests that server answered. */
interface Exported {
  requests: number
  bytes: number
  spans: number
  uncounted: number
  /** Requests the traced server answered in that time (warm-ups and checks included). */
  answered: number
}

class Sink {
  constructor(readonly running: RunningChild) {}

  get url(): string {
    return this.running.url
  }

  async stats(): Promise<SinkStats> {
    this.running.child.send({ type: 'stats' })
    return this.running.child.next<SinkStats & { type: 'stats' }>('stats')
  }

  /** Waits until no export has come for 400 ms (at most 10 s): a traced run's spans are not sent during the next run. */
  async quiet(): Promise<void> {
    let last = (await this.stats()).requests
    let still = 0
    for (let waited = 0; waited < 10_000 && still < 2; waited += 200) {
      await sleep(200)
      const now = (await this.stats()).requests
      still = now === last ? still + 1 : 0
      last = now
    }
  }

  /**
   * The counts since `before`; throws when nothing was exported, as a traced run must send its
   * spans, or, when nothing is sampled (`none`), when anything was.
   */
  since(before: SinkStats, after: SinkStats, answered: number, what: string, none: boolean): Exported {
    const exported = {
      requests: after.requests - before.requests,
      bytes: after.bytes - before.bytes,
      spans: after.spans - before.spans,
      uncounted: after.uncounted - before.uncounted,
      answered,
    }
    if (none) {
      if (exported.requests > 0) throw new Error(`${what}: the server sampling nothing exported ${exported.spans} spans in ${exported.requests} requests to the OTLP sink`)
    } else if (exported.bytes === 0 || exported.requests === 0) {
      throw new Error(`${what}: the traced server exported nothing to the OTLP sink (${exported.requests} requests, ${exported.bytes} bytes) while answering ${answered} requests`)
    }
    return exported
  }
}

/**
 * The cost of tracing: the project's server with OpenTelemetry on (every request sampled,
 * `OTEL_TRACES_SAMPLER=always_on`, or the share TRACING_RATIO names; exported over OTLP/HTTP protobuf by the SDK's batch processor to
 * lib/otlp-sink.ts, a child on 127.0.0.1 that counts and drops) against the same server with it off,
 * on the same database under the same load, in paired rounds (lib/report.ts): (a) small GETs, the
 * authenticated 100-order v1 list of small-requests.ts and a v2 single order (a database read each),
 * 10 connections, two servers kept running (with every request sampled, the reference's two as
 * well, in the v1 list's rounds), each warmed on a path for GET_PREWARM_SECONDS before its rounds;
 * (b) places as in places.ts, 50 clients without keys, a fresh server each run. Both on a fresh
 * database of 100 orders, made for this comparison; the places come last.
 * The sink's counts show the spans were exported; none at all fails the comparison.
 */
export async function tracing(context: StoreContext): Promise<void> {
  // TRACING_ROUNDS and TRACING_SECONDS shorten a run (a smoke test); their figures are not for the docs.
  const getRounds = positiveInteger('TRACING_ROUNDS') ?? GET_ROUNDS
  const placeRounds = positiveInteger('TRACING_ROUNDS') ?? PLACE_ROUNDS
  const seconds = positiveInteger('TRACING_SECONDS')
  const sampled = sampling()
  const database = await createDatabase(context.kind)
  const section = context.report.section(`Tracing on (${sampled.label}, OTLP to a local sink), against off`, context.label, 'tracing off')
  const sink = new Sink(await startServerChild('OTLP sink', 'lib/otlp-sink.ts', {}))
  let reference: { build: string; database: BenchDatabase; sink: Sink; headers?: Record<string, string> } | undefined
  try {
    const { secret } = await seed(database, ORDERS, { pets: PETS, key: true })
    const headers = bearer(secret!)
    // A server's environment: its database, and tracing to `sinkUrl` or off.
    const envOf = (databaseUrl: string, sinkUrl?: string): Record<string, string> => ({
      DATABASE_URL: databaseUrl,
      ...PROJECT_ENV,
      ...(sinkUrl === undefined ? TRACING_OFF : tracingOn(sinkUrl, sampled.env)),
    })
    const offEnv = envOf(database.url)
    const onEnv = envOf(database.url, sink.url)
    if (sampled.reference !== undefined) {
      // Its own database, made by its own seeder and migrations; its spans to a sink of their own.
      const build = referenceBuild(sampled.reference)
      reference = { build, database: await createDatabase(context.kind), sink: new Sink(await startServerChild('OTLP sink, reference', 'lib/otlp-sink.ts', {})) }
      const seeded = await seed(reference.database, ORDERS, { pets: PETS, key: true, build })
      reference.headers = bearer(seeded.secret!)
    }

    // (a) Small GETs: one untraced and one traced server, kept running through the rounds; with a
    // reference, its two servers too, in the v1 list's rounds.
    const getSeconds = seconds ?? GET_SECONDS
    const list = { path: '/v1/store/orders', off: [] as Run[], on: [] as Run[], referenceOff: [] as Run[], referenceOn: [] as Run[] }
    const order = { path: `/v2/store/orders/${ORDER_ID}`, off: [] as Run[], on: [] as Run[] }
    const servers: RunningChild[] = []
    const started = async (name: string, env: Record<string, string>, build?: string): Promise<RunningChild> => {
      const server = await startServerChild(name, 'lib/project-server.ts', env, { build })
      servers.push(server)
      return server
    }
    let getsExported: Exported
    let referenceExported: Exported | undefined
    let listBytes = 0
    try {
      const off = await started('project server, tracing off', offEnv)
      const sinkBefore = await sink.stats()
      const on = await started('project server, tracing on', onEnv)
      let answered = 0
      for (const { path } of [list, order]) {
        const plain = await context.downloader.request(`${off.url}${path}`, { headers, hash: 'raw' })
        const traced = await context.downloader.request(`${on.url}${path}`, { headers, hash: 'raw' })
        answered++
        if (plain.sha256 !== traced.sha256) throw new Error(`GET ${path}: the traced server does not send the same bytes`)
        if (path === list.path) listBytes = plain.bytes
      }
      const getRun = async (server: RunningChild, path: string, as = headers, itsSink = sink): Promise<Run & { warmupRequests: number }> => {
        const measured = await cpuDuring({ server: server.child.pid, client: 'self', sink: itsSink.running.child.pid }, () =>
          closedLoop({ url: `${server.url}${path}`, headers: as, connections: GET_CONNECTIONS, seconds: getSeconds, warmupSeconds: GET_WARMUP_SECONDS }),
        )
        const result = requireAllOk(server.child.name, measured.result)
        // The CPU read covers the warm-up too: per request of both.
        return { ...result, cpu: measured.cores, serverUs: (measured.cpuSeconds.server! * 1e6) / (result.requests + result.warmupRequests) }
      }
      /** The path answered for GET_PREWARM_SECONDS, not measured; its requests. */
      const prewarm = async (server: RunningChild, path: string, as = headers): Promise<number> => {
        const run = requireAllOk(`${server.child.name} pre-warm`, await closedLoop({ url: `${server.url}${path}`, headers: as, connections: GET_CONNECTIONS, seconds: GET_PREWARM_SECONDS, warmupSeconds: 0 }))
        return run.requests
      }
      /** A traced run, then its sink let go quiet: its spans are not sent during the next run. */
      const traced = async (runs: Run[], server: RunningChild, path: string, as = headers, itsSink = sink): Promise<number> => {
        const run = await getRun(server, path, as, itsSink)
        runs.push(run)
        await itsSink.quiet()
        return run.requests + run.warmupRequests
      }
      const listRuns = [async () => void list.off.push(await getRun(off, list.path)), async () => void (answered += await traced(list.on, on, list.path))]
      let referenceAnswered = 0
      let referenceOn: RunningChild | undefined
      let referenceBefore: SinkStats | undefined
      if (reference !== undefined) {
        const as = reference.headers!
        const referenceOff = await started('reference server, tracing off', envOf(reference.database.url), reference.build)
        referenceBefore = await reference.sink.stats()
        referenceOn = await started('reference server, tracing on', envOf(reference.database.url, reference.sink.url), reference.build)
        const answers = await Promise.all(
          [referenceOff, referenceOn].map((server) => context.downloader.request(`${server.url}${list.path}`, { headers: as, hash: 'raw' })),
        )
        referenceAnswered++
        if (answers.some((answer) => answer.sha256 !== answers[0]!.sha256 || answer.bytes !== listBytes)) {
          throw new Error(`GET ${list.path}: the reference servers do not send the bytes this tree's do`)
        }
        const { sink: referenceSink } = reference
        const measuredOn = referenceOn
        listRuns.push(
          async () => void list.referenceOff.push(await getRun(referenceOff, list.path, as, referenceSink)),
          async () => void (referenceAnswered += await traced(list.referenceOn, measuredOn, list.path, as, referenceSink)),
        )
        await prewarm(referenceOff, list.path, as)
        referenceAnswered += await prewarm(measuredOn, list.path, as)
        await referenceSink.quiet()
      }
      await prewarm(off, list.path)
      answered += await prewarm(on, list.path)
      await sink.quiet()
      await interleavedRounds(getRounds, listRuns)
      await prewarm(off, order.path)
      answered += await prewarm(on, order.path)
      await sink.quiet()
      await interleavedRounds(getRounds, [async () => void order.off.push(await getRun(off, order.path)), async () => void (answered += await traced(order.on, on, order.path))])
      // A graceful stop exports the spans still held: the sink then has them all.
      await on.child.stop()
      getsExported = sink.since(sinkBefore, await sink.stats(), answered, 'small GETs', sampled.none)
      if (reference !== undefined) {
        await referenceOn!.child.stop()
        referenceExported = reference.sink.since(referenceBefore!, await reference.sink.stats(), referenceAnswered, 'the reference, v1 list', false)
      }
    } finally {
      for (const server of servers) await server.child.stop()
    }
    // (b) Places: a fresh server each run, warmed up, then stopped gracefully (its last spans exported).
    const placeRun = async (traced: boolean): Promise<Run & { exported?: Exported }> => {
      const name = `project server, tracing ${traced ? 'on' : 'off'}`
      const before = await sink.stats()
      const server = await startServerChild(name, 'lib/project-server.ts', traced ? onEnv : offEnv)
      const load = { origin: server.url, headers, connections: PLACE_CONNECTIONS, petId: 1 }
      try {
        const warmup = requireAllOk(`${name} warm-up`, await placeLoad({ ...load, amount: WARMUP_PLACES, maxSeconds: 60 }))
        const measured = await cpuDuring({ server: server.child.pid, client: 'self', sink: sink.running.child.pid }, () =>
          placeLoad({ ...load, amount: PLACES, maxSeconds: seconds ?? PLACE_MAX_SECONDS }),
        )
        const result = requireAllOk(name, measured.result)
        await server.child.stop()
        const run = { ...result, cpu: measured.cores, serverUs: (measured.cpuSeconds.server! * 1e6) / result.requests }
        if (!traced) return run
        await sink.quiet()
        return { ...run, exported: sink.since(before, await sink.stats(), warmup.requests + result.requests, 'places', sampled.none) }
      } finally {
        await server.child.stop()
      }
    }
    const places = await pairedRounds(placeRounds, () => placeRun(false), () => placeRun(true))

    const ratios = (of: Run[], to: Run[]): RoundRatios => roundRatios(of.map((r) => r.perSecond), to.map((r) => r.perSecond))
    const rate = (runs: Run[], unit?: string): string => fmt.rate(median(runs.map((r) => r.perSecond)), unit)
    const listRatio = ratios(list.on, list.off)
    const orderRatio = ratios(order.on, order.off)
    const placeRatio = ratios(places.project, places.baseline)
    const { getTarget } = sampled
    const getVerdict = (ratio: RoundRatios): { target?: string; result: Verdict } =>
      getTarget === undefined ? { result: 'info' } : { target: `≥ ${getTarget}×`, result: verdict(ratio.median >= getTarget) }
    // Each round's traced run against its untraced pair: the CPU a request's tracing added.
    const added = (on: Run[], off: Run[]): number[] => on.map((run, i) => run.serverUs - off[i]!.serverUs)
    const addedUs = added(list.on, list.off)
    const referenceAddedUs = added(list.referenceOn, list.referenceOff)
    const addedOverReference = addedUs.map((us, round) => us - referenceAddedUs[round]!)
    const spread = (values: number[]): string => `${median(values).toFixed(1)} µs (${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)})`
    const us = (runs: Run[]): string => `${median(runs.map((r) => r.serverUs)).toFixed(0)} µs`
    const cpuCost = (of: Run[], to: Run[]): string => fmt.rounds(roundRatios(of.map((r) => r.serverUs), to.map((r) => r.serverUs)))
    const perRequest = (e: Exported): string =>
      `${fmt.count(e.spans)} spans for ${fmt.count(e.answered)} requests (${(e.spans / e.answered).toFixed(2)} each), ${fmt.mb(e.bytes)} in ${fmt.count(e.requests)} exports (${Math.round(e.bytes / e.answered)} bytes a request)` +
      (e.uncounted > 0 ? `; ${e.uncounted} exports not counted` : '')
    const placeExports = places.project.map((run) => run.exported!)
    const medianOf = (of: (e: Exported) => number): number => median(placeExports.map(of))
    const sinkCpu = (runs: Run[]): string => `${Math.round(median(runs.map((r) => r.cpu.sink!)) * 100)}%`
    const cpuShares = (run: Run): string => `${Math.round(run.cpu.server! * 100)}% / ${Math.round(run.cpu.client! * 100)}% / ${Math.round(run.cpu.sink! * 100)}%`
    section.rows.push(
      {
        measure: `authenticated GET /v1/store/orders (98 orders, ${fmt.count(listBytes)} bytes), ${GET_CONNECTIONS} connections, ${getRounds} paired rounds`,
        project: rate(list.on),
        baseline: rate(list.off),
        ratio: fmt.rounds(listRatio),
        ...getVerdict(listRatio),
      },
      {
        measure: `authenticated GET /v2/store/orders/${ORDER_ID} (a database read each), same`,
        project: rate(order.on),
        baseline: rate(order.off),
        ratio: fmt.rounds(orderRatio),
        ...getVerdict(orderRatio),
      },
      {
        measure: `places (POST /v2/store/orders, 201), ${PLACE_CONNECTIONS} clients, no key, ${placeRounds} paired rounds, on this suite's ${ORDERS}-order database`,
        project: rate(places.project, 'places/s'),
        baseline: rate(places.baseline, 'places/s'),
        ratio: fmt.rounds(placeRatio),
        target: `≥ ${PLACE_TARGET}×`,
        result: verdict(placeRatio.median >= PLACE_TARGET),
      },
      {
        measure: "the server's CPU per request, on against off: v1 list; v2 order; place",
        project: `${us(list.on)}; ${us(order.on)}; ${us(places.project)}`,
        baseline: `${us(list.off)}; ${us(order.off)}; ${us(places.baseline)}`,
        ratio: `${cpuCost(list.on, list.off)}; ${cpuCost(order.on, order.off)}; ${cpuCost(places.project, places.baseline)}`,
        result: 'info',
      },
      ...(reference === undefined
        ? [
            {
              measure: `the server's CPU a request's tracing adds on the v1 list (on − off, median of the paired rounds; ~${ADDED_CPU_MEASURED_US} µs measured from the outside on 2026-12-04, on another day's host)`,
              project: spread(addedUs),
              result: 'info' as const,
            },
          ]
        : [
            {
              measure: `the server's CPU a request's tracing adds on the v1 list (on − off, median of the rounds): this tree against main of 2026-12-04 (${sampled.reference!.slice(0, 7)}), in the same ${getRounds} rounds`,
              project: spread(addedUs),
              baseline: spread(referenceAddedUs),
              ratio: `${spread(addedOverReference)} a round, this tree's less the reference's`,
              target: '≤ 0 µs (no more than then)',
              result: verdict(median(addedOverReference) <= 0),
            },
            {
              measure: 'the reference: its v1 list traced against untraced; its CPU per request off / on; its spans',
              project: `${rate(list.referenceOn)} against ${rate(list.referenceOff)}, ${fmt.rounds(ratios(list.referenceOn, list.referenceOff))}; ${us(list.referenceOff)} / ${us(list.referenceOn)}; ${perRequest(referenceExported!)}`,
              result: 'info' as const,
            },
          ]),
      {
        measure: 'OTLP sink, the small GETs (one traced server, every request of both GETs)',
        project: perRequest(getsExported),
        result: 'info',
      },
      {
        measure: 'OTLP sink, per traced place run (median of runs; warm-up places included)',
        project:
          `${fmt.mb(medianOf((e) => e.bytes))} in ${fmt.count(medianOf((e) => e.requests))} exports, ${fmt.count(medianOf((e) => e.spans))} spans ` +
          `for ${fmt.count(medianOf((e) => e.answered))} places (${(medianOf((e) => e.spans / e.answered)).toFixed(2)} spans, ${Math.round(medianOf((e) => e.bytes / e.answered))} bytes a place)`,
        result: 'info',
      },
      {
        measure: "the sink's CPU during traced runs (median; of one core): v1 list; v2 order; places",
        project: `${sinkCpu(list.on)}; ${sinkCpu(order.on)}; ${sinkCpu(places.project)}`,
        result: 'info',
      },
      {
        measure: 'latency p50 / p99 (last round): v1 list; v2 order; places',
        project: [list.on, order.on, places.project].map((runs) => `${runs.at(-1)!.p50Ms} / ${runs.at(-1)!.p99Ms} ms`).join('; '),
        baseline: [list.off, order.off, places.baseline].map((runs) => `${runs.at(-1)!.p50Ms} / ${runs.at(-1)!.p99Ms} ms`).join('; '),
        result: 'info',
      },
      {
        measure: 'CPU: server / load generator / sink (of one core, last round): v1 list; v2 order; places',
        project: [list.on, order.on, places.project].map((runs) => cpuShares(runs.at(-1)!)).join('; '),
        baseline: [list.off, order.off, places.baseline].map((runs) => cpuShares(runs.at(-1)!)).join('; '),
        result: 'info',
      },
    )
    const perRound = (runs: Run[]): string => runs.map((run) => Math.round(run.perSecond)).join(', ')
    section.notes.push(
      `Tracing on: OTEL_EXPORTER_OTLP_ENDPOINT=<sink>, OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, ${Object.entries(sampled.env).map(([name, value]) => `${name}=${value}`).join(', ')}, OTEL_SERVICE_NAME=petstore-orders-bench, the batch processor's defaults; off: every OTEL_* variable the config reads empty. Both on one fresh database of ${ORDERS} orders.`,
      `GETs: each server answered each path for ${GET_PREWARM_SECONDS} s before its rounds, then ${getRounds} rounds of one ${getSeconds}-second run per server and path (after ${GET_WARMUP_SECONDS} s of warm-up each), off first in even rounds; after each traced run the sink is let go quiet (no export for 400 ms). ` +
        `Per round (req/s): v1 list on ${perRound(list.on)}, off ${perRound(list.off)}, ratios ${fmt.roundList(listRatio)}; v2 order on ${perRound(order.on)}, off ${perRound(order.off)}, ratios ${fmt.roundList(orderRatio)}.`,
      `Places: each run on a fresh server, ${fmt.count(WARMUP_PLACES)} warm-up places, then up to ${fmt.count(PLACES)} or ${seconds ?? PLACE_MAX_SECONDS} s, then a graceful stop. Per round (places/s): on ${perRound(places.project)}, off ${perRound(places.baseline)}, ratios ${fmt.roundList(placeRatio)}.`,
      ...(reference === undefined
        ? []
        : [
            `The reference: main of 2026-12-04 (${sampled.reference!}), built by lib/reference.ts into .bench/reference/, on a database its own seeder made, its spans to a sink of its own; its two servers run in the v1 list's rounds, after this tree's in even rounds and before them in odd ones. Per round (req/s): on ${perRound(list.referenceOn)}, off ${perRound(list.referenceOff)}; the CPU tracing added, this tree's ${addedUs.map((us) => us.toFixed(1)).join(', ')} µs, the reference's ${referenceAddedUs.map((us) => us.toFixed(1)).join(', ')} µs.`,
          ]),
      'The sink counts the spans of each protobuf export without decoding them; with every request sampled, fewer spans than requests would mean the batch processor dropped some (its queue holds 2,048).',
    )
    if (seconds !== undefined || positiveInteger('TRACING_ROUNDS') !== undefined) section.notes.push('Shortened by TRACING_ROUNDS / TRACING_SECONDS: a smoke run, not figures to record.')
  } finally {
    await sink.running.child.stop()
    await database.drop()
    await reference?.sink.running.child.stop()
    await reference?.database.drop()
  }
}
