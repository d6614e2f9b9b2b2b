import { setTimeout as sleep } from 'node:timers/promises'
import { Child, PROJECT_ENV, startServerChild, type RunningChild } from '../lib/processes.js'
import { percentile } from '../lib/probe.js'
import { cpuDuring } from '../lib/proc.js'
import { fmt, median, pairedRounds, roundRatios, verdict, type Section } from '../lib/report.js'
import type { ReceiverStats } from '../lib/webhook-receiver.js'
import { cancelRun, CONNECTIONS, WARMUP_CANCELS, type CancelRun } from './cancels.js'
import { bigDataset, createDatabase, type StoreContext } from './context.js'

/** Rounds of each measurement; the targets are judged on their median. */
const ROUNDS = 3
/** Events imported for the one endpoint: ~10 s at the target's 500 a second. */
const ONE_ENDPOINT_EVENTS = 5_000
const MANY_ENDPOINTS = 20
/** Events imported for each of the 20 endpoints: 20,000 deliveries, ~10 s at the target's 2,000 a second. */
const MANY_ENDPOINTS_EVENTS = 1_000
/** A backlog run stops waiting for the receivers after this long (the targets need a fraction of it). */
const MAX_BACKLOG_SECONDS = 60
const MAX_CANCELS = 40_000

/** Beside the healthy endpoint: endpoints that answer 200 and trickle their body, and endpoints that never answer. */
const TRICKLING = 40
const HANGING = 40
/** Orders placed one at a time while the hostile endpoints are live: 20 a second for 10 s. */
const PLACES = { count: 200, perSecond: 20 }
/** How long the placed events are waited for at the healthy endpoint once the last is placed. */
const MAX_PLACED_WAIT_MS = 15_000
const MAX_LATENCY_MS = 2000

/** Endpoints that answer 503 with `Retry-After: 3600`: after their first attempt they stay behind. */
const FAILING = 10
const BEHIND_EVENTS = 60_000
/** A fresh server's first scrapes are slower (its code is not compiled yet): these are not timed. */
const WARMUP_SCRAPES = 20
const SCRAPES = 50
/** How long the failing endpoints' first attempts are waited for before the scrapes. */
const MAX_FIRST_ATTEMPTS_MS = 30_000

/** Every server child delivers webhooks to the receivers on 127.0.0.1 (private addresses, plain http). */
const WEBHOOK_ENV = { ...PROJECT_ENV, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }

/** What webhook-setup.ts tells: positions as strings. */
interface Setup {
  after: string
  events: number
  last: string
}

interface BacklogOptions {
  /** Healthy endpoints (`/e/1…`), each sent every event of the backlog. */
  endpoints: number
  /** Orders imported after the endpoints were created: one event each. */
  orders: number
  /** Hostile endpoints created with the healthy ones, so they have the backlog too (webhook-receiver.ts). */
  trickling?: number
  hanging?: number
  /** Project servers on the database (default 1). */
  instances?: number
  /** Once the backlog is delivered, orders placed one at a time while the servers run: their latency at `/e/1`. */
  places?: { count: number; perSecond: number }
}

interface BacklogRun {
  endpoints: number
  events: number
  /** Deliveries to the healthy endpoints. */
  deliveries: number
  perSecond: number
  /** Every healthy endpoint got every event once, ascending. */
  inOrder: boolean
  seconds: number
  /** Shares of one core (servers: all instances together) while the backlog was delivered. */
  cpu: { servers: number; receivers: number }
  /** The servers' CPU seconds per healthy delivery, in µs. */
  serverCpuPerDeliveryUs: number
  placed?: PlacedRun
}

interface PlacedRun {
  placed: number
  /** Each placed event's latency at the healthy endpoint: its arrival − its timestamp (commit), ms. */
  latenciesMs: number[]
}

interface ScrapeRun {
  medianMs: number
  /** The true lag of every endpoint: the events after their position. */
  trueLag: number
  lags: number[]
  exact: boolean
}

/**
 * Comparison 10: webhooks (DESIGN §9). Endpoints are made through the store (webhook-setup.ts), the
 * events by the project itself (an import of orders, places, or cancels), delivered by project server
 * children to receivers in another child (webhook-receiver.ts) that answer 200 at once and check each
 * endpoint's order, or trickle, hang or fail on purpose. Measured, each on fresh databases:
 *
 * 1. a backlog delivered to 1 and to 20 endpoints, timed from the first delivery to the last;
 * 2. one healthy endpoint's backlog beside 40 trickling and 40 hanging endpoints, against alone;
 *    then the latency of orders placed one at a time while those 80 are live;
 * 3. the cost of a /metrics scrape with endpoints 60,000 events behind, against at the head;
 * 4. the cancels of comparison 5 with 20 endpoints enabled (every event type) against none.
 */
export async function webhooks(context: StoreContext): Promise<void> {
  const receiver = await startServerChild('webhook receivers', 'lib/webhook-receiver.ts', {})
  try {
    const section = context.report.section('10. Webhooks', context.label, 'no endpoints / alone / at the head')
    const backlogs = await backlogComparison(context, receiver, section)
    const hostile = await hostileComparison(context, receiver, section)
    section.rows.push({
      measure: 'every event once, ascending, at each healthy endpoint',
      project: `${completeness([...backlogs, ...hostile])} deliveries`,
      target: 'all',
      result: verdict([...backlogs, ...hostile].every((run) => run.inOrder)),
    })
    await metricsComparison(context, receiver, section)
    await cancelComparison(context, receiver, section)
  } finally {
    await receiver.child.stop()
  }
}

/** 1. Backlogs of 1 and 20 endpoints, absolute targets: 500 events/s and 2,000 deliveries/s. */
async function backlogComparison(context: StoreContext, receiver: RunningChild, section: Section): Promise<BacklogRun[]> {
  const one: BacklogRun[] = []
  const many: BacklogRun[] = []
  for (let round = 0; round < ROUNDS; round++) {
    one.push(await backlogRun(context, receiver, { endpoints: 1, orders: ONE_ENDPOINT_EVENTS }))
    many.push(await backlogRun(context, receiver, { endpoints: MANY_ENDPOINTS, orders: MANY_ENDPOINTS_EVENTS }))
  }
  section.rows.push(
    {
      measure: `1 endpoint: events per second, ${ROUNDS} rounds`,
      project: `${fmt.rate(rate(one), 'events/s')} ${range(one)}`,
      target: '≥ 500 events/s',
      result: verdict(rate(one) >= 500),
    },
    {
      measure: `${MANY_ENDPOINTS} endpoints: deliveries per second, ${ROUNDS} rounds`,
      project: `${fmt.rate(rate(many), 'deliveries/s')} ${range(many)}`,
      target: '≥ 2,000 deliveries/s',
      result: verdict(rate(many) >= 2000),
    },
    {
      measure: `CPU: server / receivers (of one core, last round of ${MANY_ENDPOINTS})`,
      project: `${Math.round(many.at(-1)!.cpu.servers * 100)}% / ${Math.round(many.at(-1)!.cpu.receivers * 100)}%`,
      result: 'info',
    },
  )
  section.notes.push(
    `Backlogs: 1 endpoint ${runList(one)}; ${MANY_ENDPOINTS} endpoints ${runList(many)}: events imported (one per order) before a fresh project server starts, each round a fresh database; timed at the receivers from the first delivery to the last.`,
  )
  return [...one, ...many]
}

/**
 * 2. A healthy endpoint beside hostile ones: the same backlog of ONE_ENDPOINT_EVENTS to one healthy
 * endpoint, alone (baseline) and beside 40 endpoints that answer 200 then trickle their body and 40
 * that never answer, all created before the import so they have the backlog too; default
 * configuration (15 s timeout, 100 slots). Two instances on PostgreSQL, one on SQLite. Target: the
 * healthy endpoint's events per second ≥ 0.8× alone. Then, in each run with the hostile ones, orders
 * placed one at a time by a second writer: each one's latency from its commit to the healthy
 * receiver, target max ≤ 2 s.
 */
async function hostileComparison(context: StoreContext, receiver: RunningChild, section: Section): Promise<BacklogRun[]> {
  const instances = context.kind === 'postgres' ? 2 : 1
  const alone: BacklogOptions = { endpoints: 1, orders: ONE_ENDPOINT_EVENTS, instances }
  const rounds = await pairedRounds(
    ROUNDS,
    () => backlogRun(context, receiver, alone),
    () => backlogRun(context, receiver, { ...alone, trickling: TRICKLING, hanging: HANGING, places: PLACES }),
  )
  const ratios = roundRatios(rounds.project.map((run) => run.perSecond), rounds.baseline.map((run) => run.perSecond))
  const placed = rounds.project.map((run) => run.placed!)
  const latencies = placed.flatMap((run) => run.latenciesMs).sort((a, b) => a - b)
  const expected = placed.reduce((n, run) => n + run.placed, 0)
  const cpuPerDelivery = (runs: BacklogRun[]): string => `${Math.round(median(runs.map((run) => run.serverCpuPerDeliveryUs)))} µs`
  const hostile = `${TRICKLING} trickling and ${HANGING} hanging endpoints`
  section.rows.push(
    {
      measure: `healthy endpoint beside ${hostile}: events per second, ${ROUNDS} paired rounds, ${instances} instance${instances > 1 ? 's' : ''}`,
      project: `${fmt.rate(rate(rounds.project), 'events/s')} ${range(rounds.project)}`,
      baseline: `${fmt.rate(rate(rounds.baseline), 'events/s')} ${range(rounds.baseline)}`,
      ratio: fmt.rounds(ratios),
      target: '≥ 0.8×',
      result: verdict(ratios.median >= 0.8),
    },
    {
      measure: `servers' CPU per healthy delivery (median round), servers / receivers CPU (last round)`,
      project: `${cpuPerDelivery(rounds.project)}; ${cpuShares(rounds.project.at(-1)!)}`,
      baseline: `${cpuPerDelivery(rounds.baseline)}; ${cpuShares(rounds.baseline.at(-1)!)}`,
      result: 'info',
    },
    {
      measure: `placed with the ${TRICKLING + HANGING} hostile live (${PLACES.count} at ${PLACES.perSecond}/s, each round): delivered to the healthy endpoint`,
      project: `${fmt.count(latencies.length)} of ${fmt.count(expected)}`,
      target: 'all',
      result: verdict(latencies.length === expected),
    },
    {
      measure: 'their latency from commit to the healthy receiver: p50 / p99 / max',
      project: `${fmt.ms(percentile(latencies, 50))} / ${fmt.ms(percentile(latencies, 99))} / ${fmt.ms(latencies.at(-1) ?? NaN)}`,
      target: `max ≤ ${fmt.ms(MAX_LATENCY_MS)}`,
      result: verdict(latencies.length > 0 && latencies.at(-1)! <= MAX_LATENCY_MS),
    },
  )
  section.notes.push(
    `Beside the hostile: alone ${runList(rounds.baseline)}; beside them ${runList(rounds.project)}; ratios ${fmt.roundList(ratios)}. A trickling receiver answers 200 then a byte every 500 ms without end; a hanging one never answers; both have the backlog; only the healthy endpoint is waited for.`,
  )
  return [...rounds.baseline, ...rounds.project]
}

/**
 * 3. /metrics costs the same at any backlog: FAILING endpoints that answer 503 with `Retry-After:
 * 3600`, BEHIND_EVENTS events behind (created before the import) against at the head (created after
 * it), on fresh databases in paired rounds; SCRAPES sequential scrapes each after a warm-up, the
 * median timed. Targets: the median ratio ≤ 1.2× (within the noise), and every endpoint's
 * `webhook_endpoint_lag_events` within 1% or 100 events of its true lag.
 */
async function metricsComparison(context: StoreContext, receiver: RunningChild, section: Section): Promise<void> {
  const rounds = await pairedRounds(
    ROUNDS,
    () => scrapeRun(context, receiver, false),
    () => scrapeRun(context, receiver, true),
  )
  const ratios = roundRatios(rounds.project.map((run) => run.medianMs), rounds.baseline.map((run) => run.medianMs))
  const all = [...rounds.project, ...rounds.baseline]
  const series = (runs: ScrapeRun[]): string => `${fmt.count(runs.reduce((n, run) => n + run.lags.length, 0))} series, true lag ${fmt.count(runs[0]!.trueLag)}`
  section.rows.push(
    {
      measure: `GET /metrics, ${FAILING} endpoints ${fmt.count(BEHIND_EVENTS)} events behind: median of ${SCRAPES} scrapes, ${ROUNDS} paired rounds`,
      project: fmt.ms(median(rounds.project.map((run) => run.medianMs))),
      baseline: fmt.ms(median(rounds.baseline.map((run) => run.medianMs))),
      ratio: fmt.rounds(ratios),
      target: '≤ 1.2×: no longer than at the head, within the noise',
      result: verdict(ratios.median <= 1.2),
    },
    {
      measure: 'webhook_endpoint_lag_events exact within 1% or 100 events',
      project: series(rounds.project),
      baseline: series(rounds.baseline),
      target: 'all',
      result: verdict(all.every((run) => run.exact)),
    },
  )
  section.notes.push(`/metrics: scrapes ${fmt.roundList(ratios)} (behind / at the head), each run a fresh database and server.`)
}

/** 4. Cancels of the big data set with 20 endpoints receiving every event, against none, in paired rounds. */
async function cancelComparison(context: StoreContext, receiver: RunningChild, section: Section): Promise<void> {
  await bigDataset(context)
  const remaining = context.big!.pending.remaining()
  const cancels = Math.min(MAX_CANCELS, Math.floor((remaining * 0.8) / (2 * ROUNDS)) - WARMUP_CANCELS - 2 * CONNECTIONS)
  const deliveredDuring: number[] = []
  const rounds = await pairedRounds(
    ROUNDS,
    async () => {
      await setup(context, ['remove'])
      return cancelRun(context, 'project server, no webhook endpoints', 'lib/project-server.ts', cancels, WEBHOOK_ENV)
    },
    async () => {
      await setup(context, ['remove'])
      await setup(context, ['create', String(MANY_ENDPOINTS), receiver.url, '0'])
      await reset(receiver)
      const run = await cancelRun(context, `project server, ${MANY_ENDPOINTS} webhook endpoints`, 'lib/project-server.ts', cancels, WEBHOOK_ENV)
      deliveredDuring.push((await stats(receiver)).reduce((n, r) => n + r.deliveries, 0))
      return run
    },
  )
  await setup(context, ['remove'])
  const ratios = roundRatios(rounds.project.map((r) => r.perSecond), rounds.baseline.map((r) => r.perSecond))
  const cancelRate = (runs: CancelRun[]): number => median(runs.map((run) => run.perSecond))
  const acknowledged = (runs: CancelRun[]): number => runs.reduce((n, run) => n + run.ok + WARMUP_CANCELS + CONNECTIONS, 0)
  const durable = (runs: CancelRun[]): string => `${fmt.count(runs.reduce((n, r) => n + r.durable, 0))} of ${fmt.count(runs.reduce((n, r) => n + r.ok, 0))}`
  section.rows.push(
    {
      measure: `cancels per second, ${CONNECTIONS} clients, ${MANY_ENDPOINTS} endpoints enabled, ${ROUNDS} paired rounds`,
      project: fmt.rate(cancelRate(rounds.project), 'cancels/s'),
      baseline: fmt.rate(cancelRate(rounds.baseline), 'cancels/s'),
      ratio: fmt.rounds(ratios),
      target: '≥ 0.9×',
      result: verdict(ratios.median >= 0.9),
    },
    {
      measure: 'deliveries received by the end of each run (of cancels × endpoints, warm-up included)',
      project: `${fmt.count(deliveredDuring.reduce((a, b) => a + b, 0))} of ~${fmt.count(acknowledged(rounds.project) * MANY_ENDPOINTS)}`,
      result: 'info',
    },
    {
      measure: 'durable after SIGKILL',
      project: `${durable(rounds.project)} acknowledged`,
      baseline: durable(rounds.baseline),
      target: 'all',
      result: verdict([...rounds.project, ...rounds.baseline].every((r) => r.durable >= r.ok)),
    },
  )
  section.notes.push(
    `Cancels: ${fmt.count(cancels)} a run at most (10 s), after ${fmt.count(WARMUP_CANCELS)} warm-up cancels; endpoints made afresh at the head of the feed for each run with them; ratios ${fmt.roundList(ratios)}.`,
  )
}

/**
 * A fresh database, the endpoints (healthy and hostile), then `orders` orders imported; project
 * servers deliver the backlog, timed at the healthy receivers from their first delivery to their
 * last (hostile endpoints never finish: they are not waited for). Then, when asked, orders placed.
 */
async function backlogRun(context: StoreContext, receiver: RunningChild, options: BacklogOptions): Promise<BacklogRun> {
  const { endpoints, orders, trickling = 0, hanging = 0, instances = 1 } = options
  const database = await createDatabase(context.kind)
  try {
    const made = await setupIn(database.url, ['create', String(endpoints), receiver.url, String(orders), '--trickling', String(trickling), '--hanging', String(hanging)])
    await reset(receiver)
    const servers = await startServers(database.url, instances)
    try {
      const pids = { receivers: receiver.child.pid, ...Object.fromEntries(servers.map((server, i) => [`server ${i}`, server.child.pid])) }
      const measured = await cpuDuring(pids, () =>
        until(
          async () => healthy(await stats(receiver)),
          (received) => received.length === endpoints && received.every((r) => r.deliveries >= made.events),
          MAX_BACKLOG_SECONDS * 1000,
        ),
      )
      const serverSum = (shares: Record<string, number>): number => servers.reduce((n, _, i) => n + shares[`server ${i}`]!, 0)
      const run = backlogResult(made, endpoints, measured.result)
      run.cpu = { servers: serverSum(measured.cores), receivers: measured.cores.receivers! }
      run.serverCpuPerDeliveryUs = run.deliveries > 0 ? (serverSum(measured.cpuSeconds) / run.deliveries) * 1e6 : NaN
      const beside = trickling + hanging > 0 ? ` beside ${trickling} trickling, ${hanging} hanging` : ''
      console.log(
        `  ${endpoints} endpoint(s)${beside}, ${instances} server(s): ${fmt.count(run.deliveries)} of ${fmt.count(made.events * endpoints)} deliveries in ${run.seconds.toFixed(2)} s, ${fmt.rate(run.perSecond, 'a second')}, servers ${Math.round(run.cpu.servers * 100)}% / receivers ${Math.round(run.cpu.receivers * 100)}% of a core${run.inOrder ? '' : ', NOT every event once in order'}`,
      )
      if (options.places !== undefined) run.placed = await placedRun(database.url, receiver, options.places)
      return run
    } finally {
      await Promise.all(servers.map((server) => server.child.kill()))
    }
  } finally {
    await database.drop()
  }
}

/** The healthy receivers' figures for a backlog of `made`, to `endpoints` endpoints (CPU figures filled in by the caller). */
function backlogResult(made: Setup, endpoints: number, received: ReceiverStats[]): BacklogRun {
  const deliveries = received.reduce((n, r) => n + r.deliveries, 0)
  const after = BigInt(made.after)
  const inOrder =
    received.length === endpoints && received.every((r) => r.deliveries === made.events && r.outOfOrder === 0 && BigInt(r.firstId!) > after && r.lastId === made.last)
  const seconds = (Math.max(...received.map((r) => r.lastMs)) - Math.min(...received.map((r) => r.firstMs))) / 1000
  const perSecond = seconds > 0 ? deliveries / seconds : 0
  return { endpoints, events: made.events, deliveries, perSecond, inOrder, seconds, cpu: { servers: NaN, receivers: NaN }, serverCpuPerDeliveryUs: NaN }
}

/** Orders placed one at a time by a second writer while the servers run; each one's latency at the healthy receiver `/e/1`. */
async function placedRun(databaseUrl: string, receiver: RunningChild, places: { count: number; perSecond: number }): Promise<PlacedRun> {
  const placed = await setupIn(databaseUrl, ['place', String(places.count), String(places.perSecond)])
  const latenciesMs = await until(
    () => latencies(receiver, '/e/1', placed.after),
    (ms) => ms.length >= placed.events,
    MAX_PLACED_WAIT_MS,
  )
  const sorted = [...latenciesMs].sort((a, b) => a - b)
  console.log(
    `  placed ${placed.events} at ${places.perSecond}/s: ${latenciesMs.length} delivered to the healthy endpoint, latency p50 ${fmt.ms(percentile(sorted, 50))}, max ${fmt.ms(sorted.at(-1) ?? NaN)}`,
  )
  return { placed: placed.events, latenciesMs }
}

/**
 * One server's /metrics with FAILING failing endpoints on a fresh database of BEHIND_EVENTS orders,
 * the endpoints created before the import (`behind`: that many events behind) or after it (at the
 * head). Behind, their first attempts are waited for, so the scrapes meet them waiting an hour.
 */
async function scrapeRun(context: StoreContext, receiver: RunningChild, behind: boolean): Promise<ScrapeRun> {
  const database = await createDatabase(context.kind)
  try {
    const order = behind ? [] : ['--orders-first']
    const made = await setupIn(database.url, ['create', '0', receiver.url, String(BEHIND_EVENTS), '--failing', String(FAILING), ...order])
    await reset(receiver)
    const server = (await startServers(database.url, 1))[0]!
    try {
      if (behind) {
        const failed = await until(() => stats(receiver), (received) => received.length >= FAILING, MAX_FIRST_ATTEMPTS_MS)
        if (failed.length < FAILING) console.log(`  only ${failed.length} of ${FAILING} failing endpoints had their first attempt within ${MAX_FIRST_ATTEMPTS_MS / 1000} s`)
      }
      const metrics = `${server.url}/metrics`
      for (let i = 0; i < WARMUP_SCRAPES; i++) await context.downloader.request(metrics)
      const times: number[] = []
      for (let i = 0; i < SCRAPES; i++) times.push((await context.downloader.request(metrics)).ms)
      const lags = endpointLags(await (await fetch(metrics, { signal: AbortSignal.timeout(30_000) })).text())
      const trueLag = made.events
      const exact = lags.length === FAILING && lags.every((lag) => Math.abs(lag - trueLag) <= Math.max(100, trueLag * 0.01))
      const run = { medianMs: median(times), trueLag, lags, exact }
      console.log(
        `  /metrics, ${FAILING} endpoints ${behind ? `${fmt.count(trueLag)} events behind` : 'at the head'}: median ${fmt.ms(run.medianMs)} of ${SCRAPES}; lags ${[...new Set(lags)].map(fmt.count).join(', ')} (true ${fmt.count(trueLag)})${exact ? '' : ', NOT exact'}`,
      )
      return run
    } finally {
      await server.child.kill()
    }
  } finally {
    await database.drop()
  }
}

/** The values of `webhook_endpoint_lag_events` in a Prometheus text exposition, one per endpoint. */
function endpointLags(exposition: string): number[] {
  return [...exposition.matchAll(/^webhook_endpoint_lag_events\{endpoint="[0-9]+"\} (\S+)$/gm)].map((match) => Number(match[1]))
}

/** `instances` project servers on one database, started together (the database is migrated already). */
async function startServers(databaseUrl: string, instances: number): Promise<RunningChild[]> {
  const starting = Array.from({ length: instances }, (_, i) =>
    startServerChild(`project server ${i} (webhooks)`, 'lib/project-server.ts', { DATABASE_URL: databaseUrl, ...WEBHOOK_ENV }),
  )
  const started = await Promise.allSettled(starting)
  const servers = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
  const failure = started.find((result) => result.status === 'rejected')
  if (failure !== undefined) {
    await Promise.all(servers.map((server) => server.child.kill()))
    throw failure.reason
  }
  return servers
}

/** Reads `probe` every 100 ms until `done` holds or `timeoutMs` passed; the last reading either way. */
async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (done(value) || Date.now() > deadline) return value
    await sleep(100)
  }
}

function rate(runs: BacklogRun[]): number {
  return median(runs.map((run) => run.perSecond))
}

function range(runs: BacklogRun[]): string {
  return `(${runs.map((run) => fmt.count(Math.round(run.perSecond))).join(', ')})`
}

function runList(runs: BacklogRun[]): string {
  return runs.map((run) => `${fmt.count(run.deliveries)} in ${run.seconds.toFixed(2)} s`).join(', ')
}

function completeness(runs: BacklogRun[]): string {
  return `${fmt.count(runs.reduce((n, run) => n + run.deliveries, 0))} of ${fmt.count(runs.reduce((n, run) => n + run.events * run.endpoints, 0))}`
}

function cpuShares(run: BacklogRun): string {
  return `${Math.round(run.cpu.servers * 100)}% / ${Math.round(run.cpu.receivers * 100)}%`
}

/** The healthy receivers (`/e/…`) among all. */
function healthy(received: ReceiverStats[]): ReceiverStats[] {
  return received.filter((r) => r.path.startsWith('/e/'))
}

function setup(context: StoreContext, args: string[]): Promise<Setup> {
  return setupIn(context.big!.database.url, args)
}

async function setupIn(databaseUrl: string, args: string[]): Promise<Setup> {
  const child = new Child('webhook setup', 'lib/webhook-setup.ts', { env: { DATABASE_URL: databaseUrl }, args })
  try {
    return await child.next<Setup & { type: 'done' }>('done', 300_000)
  } finally {
    await child.exited
  }
}

async function reset(receiver: RunningChild): Promise<void> {
  receiver.child.send({ type: 'reset' })
  await receiver.child.next('reset')
}

async function stats(receiver: RunningChild): Promise<ReceiverStats[]> {
  receiver.child.send({ type: 'stats' })
  return (await receiver.child.next<{ type: 'stats'; receivers: ReceiverStats[] }>('stats')).receivers
}

/** Latencies (ms) of the events after `after` at one healthy path, each event's first delivery. */
async function latencies(receiver: RunningChild, path: string, after: string): Promise<number[]> {
  receiver.child.send({ type: 'latencies', path, after })
  return (await receiver.child.next<{ type: 'latencies'; ms: number[] }>('latencies')).ms
}
