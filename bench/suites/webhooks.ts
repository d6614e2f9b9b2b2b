import { setTimeout as sleep } from 'node:timers/promises'
import { Child, PROJECT_ENV, startServerChild, type RunningChild } from '../lib/processes.js'
import { cpuDuring } from '../lib/proc.js'
import { fmt, median, pairedRounds, roundRatios, verdict } from '../lib/report.js'
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

/** Every server child delivers webhooks to the receivers on 127.0.0.1 (private addresses, plain http). */
const WEBHOOK_ENV = { ...PROJECT_ENV, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }

interface Setup {
  after: string
  events: number
  last: string
}

interface BacklogRun {
  endpoints: number
  events: number
  deliveries: number
  perSecond: number
  /** Every endpoint got every event once, ascending. */
  inOrder: boolean
  seconds: number
  cpu: Record<string, number>
}

/**
 * Comparison 10: webhooks (DESIGN §9). Endpoints are made through the store (webhook-setup.ts), the
 * events by the project itself (an import of orders, or cancels), delivered by a project server
 * child to receivers in another child (webhook-receiver.ts) that answer 200 at once and check each
 * endpoint's order. 1 and 2: a backlog of events delivered to 1 and to 20 endpoints, timed from the
 * first delivery to the last at the receivers; 3: the cancels of comparison 5 with 20 endpoints
 * enabled (every event type) against none, in paired rounds.
 */
export async function webhooks(context: StoreContext): Promise<void> {
  const receiver = await startServerChild('webhook receivers', 'lib/webhook-receiver.ts', {})
  try {
    const section = context.report.section('10. Webhooks', context.label, 'no endpoints')
    const one: BacklogRun[] = []
    const many: BacklogRun[] = []
    for (let round = 0; round < ROUNDS; round++) {
      one.push(await backlogRun(context, receiver, 1, ONE_ENDPOINT_EVENTS))
      many.push(await backlogRun(context, receiver, MANY_ENDPOINTS, MANY_ENDPOINTS_EVENTS))
    }
    const rate = (runs: BacklogRun[]): number => median(runs.map((run) => run.perSecond))
    const range = (runs: BacklogRun[]): string => `(${runs.map((run) => fmt.count(Math.round(run.perSecond))).join(', ')})`
    const complete = (runs: BacklogRun[]): string =>
      `${fmt.count(runs.reduce((n, run) => n + run.deliveries, 0))} of ${fmt.count(runs.reduce((n, run) => n + run.events * run.endpoints, 0))}`
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
        measure: 'every event once, ascending, at each endpoint',
        project: `${complete([...one, ...many])} deliveries`,
        target: 'all',
        result: verdict([...one, ...many].every((run) => run.inOrder)),
      },
      {
        measure: `CPU: server / receivers (of one core, last round of ${MANY_ENDPOINTS})`,
        project: `${Math.round(many.at(-1)!.cpu.server! * 100)}% / ${Math.round(many.at(-1)!.cpu.receivers! * 100)}%`,
        result: 'info',
      },
    )

    // 3. Cancels of the big data set with 20 endpoints receiving every event, against none.
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
        project: `${fmt.count(rounds.project.reduce((n, r) => n + r.durable, 0))} of ${fmt.count(rounds.project.reduce((n, r) => n + r.ok, 0))} acknowledged`,
        baseline: `${fmt.count(rounds.baseline.reduce((n, r) => n + r.durable, 0))} of ${fmt.count(rounds.baseline.reduce((n, r) => n + r.ok, 0))}`,
        target: 'all',
        result: verdict([...rounds.project, ...rounds.baseline].every((r) => r.durable >= r.ok)),
      },
    )
    const runs = (list: BacklogRun[]): string => list.map((run) => `${fmt.count(run.deliveries)} in ${run.seconds.toFixed(2)} s`).join(', ')
    section.notes.push(
      `Backlogs: 1 endpoint ${runs(one)}; ${MANY_ENDPOINTS} endpoints ${runs(many)}: events imported (one per order) before a fresh project server starts, each round a fresh database; timed at the receivers from the first delivery to the last. Cancels: ${fmt.count(cancels)} a run at most (10 s), after ${fmt.count(WARMUP_CANCELS)} warm-up cancels; endpoints made afresh at the head of the feed for each run with them; ratios ${fmt.roundList(ratios)}.`,
    )
  } finally {
    await receiver.child.stop()
  }
}

/** A fresh database, `endpoints` endpoints, then `orders` orders imported; a project server delivers them all. */
async function backlogRun(context: StoreContext, receiver: RunningChild, endpoints: number, orders: number): Promise<BacklogRun> {
  const database = await createDatabase(context.kind)
  try {
    const made = await setupIn(database.url, ['create', String(endpoints), receiver.url, String(orders)])
    await reset(receiver)
    const server = await startServerChild('project server (webhooks)', 'lib/project-server.ts', { DATABASE_URL: database.url, ...WEBHOOK_ENV })
    try {
      const measured = await cpuDuring({ server: server.child.pid, receivers: receiver.child.pid }, async () => {
        const deadline = Date.now() + MAX_BACKLOG_SECONDS * 1000
        for (;;) {
          const received = await stats(receiver)
          const done = received.length === endpoints && received.every((r) => r.deliveries >= made.events)
          if (done || Date.now() > deadline) return received
          await sleep(100)
        }
      })
      const received = measured.result
      const deliveries = received.reduce((n, r) => n + r.deliveries, 0)
      const after = BigInt(made.after)
      const inOrder =
        received.length === endpoints &&
        received.every((r) => r.deliveries === made.events && r.outOfOrder === 0 && BigInt(r.firstId!) > after && r.lastId === made.last)
      const first = Math.min(...received.map((r) => r.firstMs))
      const last = Math.max(...received.map((r) => r.lastMs))
      const seconds = (last - first) / 1000
      const run = { endpoints, events: made.events, deliveries, perSecond: seconds > 0 ? deliveries / seconds : 0, inOrder, seconds, cpu: measured.cores }
      console.log(`  ${endpoints} endpoint(s): ${fmt.count(deliveries)} of ${fmt.count(made.events * endpoints)} deliveries in ${seconds.toFixed(2)} s, ${fmt.rate(run.perSecond, 'a second')}${inOrder ? '' : ', NOT every event once in order'}`)
      return run
    } finally {
      await server.child.kill()
    }
  } finally {
    await database.drop()
  }
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
