import { bearer } from '../lib/client.js'
import { cancelLoad, requireAllOk, type LoadResult } from '../lib/load.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { fmt, verdict } from '../lib/report.js'
import { bigDataset, type StoreContext } from './context.js'

const CONNECTIONS = 50
const WARMUP_CANCELS = 1_000
const MAX_SECONDS = 10
/** Enough for MAX_SECONDS at rates well above what this machine reaches; fewer if the data set is small. */
const PROJECT_CANCELS = 100_000
const BASELINE_CANCELS = 30_000

interface CancelRun extends LoadResult {
  /** Orders of the measured range that are cancelled in the database after the server was SIGKILLed. */
  durable: number
}

/**
 * Comparison 5: 50 concurrent clients each cancelling distinct pending orders (DELETE, 204), the
 * project's server (group commit) versus the same server committing each cancel in its own
 * synchronous=FULL transaction (baselines/per-transaction-cancel-server.ts). After each run the server
 * is killed with SIGKILL and the database is read: every acknowledged cancel must be there. On
 * PostgreSQL the same load is measured and reported.
 */
export async function cancels(context: StoreContext): Promise<void> {
  await bigDataset(context)
  const section = context.report.section(
    '5. Durable cancels, 50 concurrent clients',
    context.label,
    context.kind === 'sqlite' ? 'one transaction per cancel' : '',
  )
  const project = await run(context, 'project server', 'lib/project-server.ts', PROJECT_CANCELS)
  const cancelledRow = (name: string, result: CancelRun): string => `${fmt.count(result.durable)} of ${fmt.count(result.ok)} acknowledged (${name})`

  if (context.kind === 'sqlite') {
    const baseline = await run(context, 'per-transaction cancel server', 'baselines/per-transaction-cancel-server.ts', BASELINE_CANCELS)
    const ratio = project.perSecond / baseline.perSecond
    section.rows.push(
      {
        measure: 'cancels per second (204)',
        project: fmt.rate(project.perSecond, 'cancels/s'),
        baseline: fmt.rate(baseline.perSecond, 'cancels/s'),
        ratio: fmt.ratio(ratio),
        target: '≥ 5×',
        result: verdict(ratio >= 5),
      },
      {
        measure: 'latency p50 / p99',
        project: `${project.p50Ms} / ${project.p99Ms} ms`,
        baseline: `${baseline.p50Ms} / ${baseline.p99Ms} ms`,
        result: 'info',
      },
      {
        measure: 'durable after SIGKILL',
        project: cancelledRow('project', project),
        baseline: cancelledRow('baseline', baseline),
        target: 'all',
        result: verdict(project.durable >= project.ok && baseline.durable >= baseline.ok),
      },
    )
    section.notes.push(
      `Runs: project ${fmt.count(project.requests)} cancels in ${project.seconds} s; baseline ${fmt.count(baseline.requests)} in ${baseline.seconds} s (each after ${fmt.count(WARMUP_CANCELS)} warm-up cancels). Both use synchronous=FULL in WAL mode: every COMMIT syncs the WAL before its 204s are sent.`,
    )
  } else {
    section.rows.push(
      { measure: 'cancels per second (204)', project: fmt.rate(project.perSecond, 'cancels/s'), target: 'report', result: 'info' },
      { measure: 'latency p50 / p99', project: `${project.p50Ms} / ${project.p99Ms} ms`, result: 'info' },
      {
        measure: 'durable after SIGKILL',
        project: cancelledRow('project', project),
        target: 'all',
        result: verdict(project.durable >= project.ok),
      },
    )
    section.notes.push(
      `${fmt.count(project.requests)} cancels in ${project.seconds} s after ${fmt.count(WARMUP_CANCELS)} warm-up cancels; PostgreSQL with synchronous_commit=on (its default), DATABASE_POOL_SIZE=10 (the default).`,
    )
  }
}

async function run(context: StoreContext, name: string, script: string, cancels: number): Promise<CancelRun> {
  const big = context.big!
  const server = await startServerChild(name, script, { DATABASE_URL: big.database.url, ...PROJECT_ENV })
  const headers = bearer(big.secret)
  try {
    const warmup = big.pending.take(WARMUP_CANCELS + CONNECTIONS)
    requireAllOk(`${name} warm-up`, await cancelLoad({ origin: server.url, headers, ids: warmup, connections: CONNECTIONS, maxSeconds: 60 }))
    const ids = big.pending.take(cancels + CONNECTIONS)
    const result = requireAllOk(name, await cancelLoad({ origin: server.url, headers, ids, connections: CONNECTIONS, maxSeconds: MAX_SECONDS }))
    // No graceful shutdown: whatever was acknowledged must already be on disk.
    await server.child.kill()
    const durable = await big.database.countCancelled(ids[0]!, result.lastIdDrawn)
    return { ...result, durable }
  } finally {
    await server.child.kill()
  }
}
