import { bearer } from '../lib/client.js'
import { cancelLoad, requireAllOk, type LoadResult } from '../lib/load.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { cpuDuring } from '../lib/proc.js'
import { fmt, median, pairedRounds, roundRatios, verdict } from '../lib/report.js'
import { bigDataset, type StoreContext } from './context.js'

export const CONNECTIONS = 50
export const WARMUP_CANCELS = 1_000
const MAX_SECONDS = 10
/** Enough for MAX_SECONDS at rates well above what this machine reaches; fewer if the data set is small. */
const PROJECT_CANCELS = 100_000
const BASELINE_CANCELS = 40_000
/** SQLite: paired rounds, each a fresh server of each kind, sharing the cancels above. */
const ROUNDS = 3

export interface CancelRun extends LoadResult {
  /** CPU of the server and of the load generator during the measured run, as shares of one core. */
  cpu: Record<string, number>
  /** Orders of the measured range that are cancelled in the database after the server was SIGKILLed. */
  durable: number
  /** The measured range: the first and the last order id drawn (every id sent is in it). */
  firstId: number
  lastId: number
}

/**
 * Comparison 5: 50 concurrent clients each cancelling distinct pending orders (DELETE, 204), the
 * project's server (group commit) versus the same server committing each cancel in its own
 * synchronous=FULL transaction (baselines/per-transaction-cancel-server.ts), and versus that
 * server with synchronous=OFF (durability off, the target where fsync is cheap), in paired rounds
 * (lib/report.ts). After each run the server is killed with SIGKILL and the database is read: every
 * acknowledged cancel must be there. On PostgreSQL the same load is measured and reported.
 */
export async function cancels(context: StoreContext): Promise<void> {
  await bigDataset(context)
  const section = context.report.section(
    '5. Durable cancels, 50 concurrent clients',
    context.label,
    context.kind === 'sqlite' ? 'one transaction per cancel' : '',
  )
  // Pending orders left in the data set, shared between the runs (each also draws a warm-up).
  const remaining = context.big!.pending.remaining()
  const share = (part: number, cap: number): number => Math.min(cap, Math.floor(remaining * part) - WARMUP_CANCELS - 2 * CONNECTIONS)
  const cpuRow = (result: CancelRun): string => `${Math.round(result.cpu.server! * 100)}% / ${Math.round(result.cpu.client! * 100)}%`
  const cancelledRow = (name: string, results: CancelRun[]): string =>
    `${fmt.count(sum(results, (r) => r.durable))} of ${fmt.count(sum(results, (r) => r.ok))} acknowledged (${name})`
  const allDurable = (results: CancelRun[]): boolean => results.every((result) => result.durable >= result.ok)

  if (context.kind === 'sqlite') {
    // Each baseline round runs both peers: committing each cancel alone durably, and without syncing.
    const rounds = await pairedRounds(
      ROUNDS,
      async () => ({
        durable: await cancelRun(context, 'per-transaction cancel server', 'baselines/per-transaction-cancel-server.ts', share(0.2 / ROUNDS, Math.floor(BASELINE_CANCELS / ROUNDS))),
        unsynced: await cancelRun(context, 'per-transaction cancel server, synchronous=OFF', 'baselines/per-transaction-cancel-server.ts', share(0.2 / ROUNDS, Math.floor(PROJECT_CANCELS / ROUNDS)), { BASELINE_SYNCHRONOUS: 'OFF' }),
      }),
      () => cancelRun(context, 'project server', 'lib/project-server.ts', share(0.5 / ROUNDS, Math.floor(PROJECT_CANCELS / ROUNDS))),
    )
    const durable = rounds.baseline.map((round) => round.durable)
    const unsynced = rounds.baseline.map((round) => round.unsynced)
    const rate = (results: CancelRun[]): number => median(results.map((result) => result.perSecond))
    const ratios = roundRatios(rounds.project.map((r) => r.perSecond), durable.map((r) => r.perSecond))
    const unsyncedRatios = roundRatios(rounds.project.map((r) => r.perSecond), unsynced.map((r) => r.perSecond))
    const project = rounds.project.at(-1)!
    const baseline = durable.at(-1)!
    // Group commit pays where a sync is dear; where it is so cheap that committing each cancel alone
    // is bound by its CPU, the target is to cost (nearly) nothing against no sync at all.
    const groupCommitPays = ratios.median >= 5 || unsyncedRatios.median >= 0.9
    section.rows.push(
      {
        measure: `cancels per second (204), ${ROUNDS} paired rounds`,
        project: fmt.rate(rate(rounds.project), 'cancels/s'),
        baseline: fmt.rate(rate(durable), 'cancels/s'),
        ratio: fmt.rounds(ratios),
        target: '≥ 5× (or the row below)',
        result: verdict(groupCommitPays),
      },
      {
        measure: 'against the same peer with durability off (synchronous=OFF)',
        project: fmt.rate(rate(rounds.project), 'cancels/s'),
        baseline: fmt.rate(rate(unsynced), 'cancels/s'),
        ratio: fmt.rounds(unsyncedRatios),
        target: '≥ 0.9× (or the row above)',
        result: verdict(groupCommitPays),
      },
      {
        measure: 'latency p50 / p99 (last round)',
        project: `${project.p50Ms} / ${project.p99Ms} ms`,
        baseline: `${baseline.p50Ms} / ${baseline.p99Ms} ms`,
        result: 'info',
      },
      {
        measure: 'CPU: server / load generator (of one core, last round)',
        project: cpuRow(project),
        baseline: cpuRow(baseline),
        result: 'info',
      },
      {
        measure: 'durable after SIGKILL',
        project: cancelledRow('project', rounds.project),
        baseline: cancelledRow('baseline', durable),
        target: 'all',
        result: verdict(allDurable(rounds.project) && allDurable(durable)),
      },
    )
    const runs = (results: CancelRun[]): string => results.map((r) => `${fmt.count(r.requests)} in ${r.seconds.toFixed(2)} s`).join(', ')
    section.notes.push(
      `Runs: project ${runs(rounds.project)}; baseline ${runs(durable)}; baseline with synchronous=OFF ${runs(unsynced)} (each on a fresh server, after ${fmt.count(WARMUP_CANCELS)} warm-up cancels, then SIGKILLed); ratios ${fmt.roundList(ratios)} and ${fmt.roundList(unsyncedRatios)}. The project and the first baseline use synchronous=FULL in WAL mode: every COMMIT syncs the WAL before its 204s are sent.`,
    )
  } else {
    const project = await cancelRun(context, 'project server', 'lib/project-server.ts', share(0.5, PROJECT_CANCELS))
    // Not a target: the same load with a pool as large as the number of clients.
    const largePool = await cancelRun(context, 'project server, DATABASE_POOL_SIZE=50', 'lib/project-server.ts', share(0.5, PROJECT_CANCELS), { DATABASE_POOL_SIZE: '50' })
    section.rows.push(
      { measure: 'cancels per second (204)', project: fmt.rate(project.perSecond, 'cancels/s'), target: 'report', result: 'info' },
      { measure: 'latency p50 / p99', project: `${project.p50Ms} / ${project.p99Ms} ms`, result: 'info' },
      { measure: 'CPU: server / load generator (of one core)', project: cpuRow(project), result: 'info' },
      { measure: 'same, DATABASE_POOL_SIZE=50', project: fmt.rate(largePool.perSecond, 'cancels/s'), result: 'info' },
      {
        measure: 'durable after SIGKILL',
        project: cancelledRow('project', [project]),
        target: 'all',
        result: verdict(allDurable([project, largePool])),
      },
    )
    section.notes.push(
      `${fmt.count(project.requests)} cancels in ${project.seconds.toFixed(2)} s after ${fmt.count(WARMUP_CANCELS)} warm-up cancels; PostgreSQL with synchronous_commit=on (its default), DATABASE_POOL_SIZE=10 (the default).`,
    )
  }
}

/**
 * One run on a fresh server: `CONNECTIONS` clients, warm-up cancels first, then `cancels` measured
 * (at most `MAX_SECONDS`), then SIGKILL and the durable count. Also comparison 8's (events.ts).
 */
export async function cancelRun(
  context: StoreContext,
  name: string,
  script: string,
  cancels: number,
  env: Record<string, string> = {},
  maxSeconds = MAX_SECONDS,
): Promise<CancelRun> {
  const big = context.big!
  if (cancels < 2 * CONNECTIONS) throw new Error(`too few pending orders left for ${name}: use a larger BENCH_ORDERS`)
  const server = await startServerChild(name, script, { DATABASE_URL: big.database.url, ...PROJECT_ENV, ...env })
  const headers = bearer(big.secret)
  try {
    const warmup = big.pending.take(WARMUP_CANCELS + CONNECTIONS)
    requireAllOk(`${name} warm-up`, await cancelLoad({ origin: server.url, headers, ids: warmup, connections: CONNECTIONS, maxSeconds: 60 }))
    const ids = big.pending.take(cancels + CONNECTIONS)
    const measured = await cpuDuring({ server: server.child.pid, client: 'self' }, () =>
      cancelLoad({ origin: server.url, headers, ids, connections: CONNECTIONS, maxSeconds }),
    )
    const result = requireAllOk(name, measured.result)
    // No graceful shutdown: whatever was acknowledged must already be on disk.
    await server.child.kill()
    const durable = await big.database.countCancelled(ids[0]!, result.lastIdDrawn)
    return { ...result, durable, cpu: measured.cores, firstId: ids[0]!, lastId: result.lastIdDrawn }
  } finally {
    await server.child.kill()
  }
}

function sum(results: CancelRun[], of: (result: CancelRun) => number): number {
  return results.reduce((total, result) => total + of(result), 0)
}
