import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { bearer } from '../lib/client.js'
import { closedLoop, requireAllOk, type LoadResult } from '../lib/load.js'
import { WORK_DIR } from '../lib/paths.js'
import { PROJECT_ENV, startServerChild, type RunningChild } from '../lib/processes.js'
import { cpuDuring } from '../lib/proc.js'
import { fmt, pairedRounds, roundRatios, verdict } from '../lib/report.js'
import { createDatabase, seed, type StoreContext } from './context.js'

const ORDERS = 100
const CONNECTIONS = 10
// Pairs of short rounds rather than two long ones: the 2-core VM's speed drifts by up to 2× from one
// minute to the next (two rounds of 5 s gave 0.50× and 0.93× for the same code within minutes), and
// a pair's two servers see about the same machine.
const ROUNDS = 6
const SECONDS = 3
const WARMUP_SECONDS = 1

/**
 * Comparison 4: requests/s of an authenticated GET of a 100-order list, the project's server versus a
 * raw node:http server returning the same bytes from memory, under the same autocannon load, in
 * paired rounds (lib/report.ts). On PostgreSQL, also the database transactions per request (from the server's
 * own statistics), which shows whether authentication costs a round trip.
 */
export async function smallRequests(context: StoreContext): Promise<void> {
  const { downloader } = context
  const database = await createDatabase(context.kind)
  const section = context.report.section('4. Small requests (100-order list)', context.label, 'raw node:http')
  mkdirSync(WORK_DIR, { recursive: true })
  const bodyFile = join(WORK_DIR, `small-${context.kind}.json`)
  try {
    const { secret } = await seed(database, ORDERS, { pets: 0, key: true })
    const headers = bearer(secret!)
    const transactionsBefore = await database.transactions?.()

    const project = await startServerChild('project server', 'lib/project-server.ts', { DATABASE_URL: database.url, ...PROJECT_ENV })
    const raw: { child?: RunningChild } = {}
    const projectRuns: (LoadResult & { warmupRequests: number })[] = []
    const rawRuns: LoadResult[] = []
    const rawCpu: Record<string, number>[] = []
    const projectCpu: Record<string, number>[] = []
    let projectRequests = 0
    let bodyBytes = 0
    try {
      const first = await downloader.request(`${project.url}/v1/store/orders`, { headers, hash: 'raw', saveTo: bodyFile })
      projectRequests++
      bodyBytes = first.bytes
      raw.child = await startServerChild('raw node:http server', 'baselines/raw-bytes-server.ts', { BODY_FILE: bodyFile })
      const check = await downloader.request(`${raw.child.url}/v1/store/orders`, { headers, hash: 'raw' })
      if (check.sha256 !== first.sha256) throw new Error('the raw server does not send the same bytes')
      const load = { headers, connections: CONNECTIONS, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS }
      await pairedRounds(
        ROUNDS,
        async () => {
          const rawLoad = await cpuDuring({ server: raw.child!.child.pid, client: 'self' }, () => closedLoop({ ...load, url: `${raw.child!.url}/v1/store/orders` }))
          rawRuns.push(requireAllOk('raw server', rawLoad.result))
          rawCpu.push(rawLoad.cores)
        },
        async () => {
          const projectLoad = await cpuDuring({ server: project.child.pid, client: 'self' }, () => closedLoop({ ...load, url: `${project.url}/v1/store/orders` }))
          const run = requireAllOk('project server', projectLoad.result)
          projectCpu.push(projectLoad.cores)
          projectRuns.push(run)
          projectRequests += run.requests + run.warmupRequests
        },
      )
    } finally {
      await raw.child?.child.stop()
      await project.child.stop()
    }

    // Not targets: the same bytes from a bare Fastify app, for scale; and the same app with one pino
    // line per request and nothing else, to show what an access log costs by itself.
    const bareLoad = async (what: string, env: Record<string, string>): Promise<LoadResult> => {
      const bare = await startServerChild(what, 'baselines/fastify-bytes-server.ts', { BODY_FILE: bodyFile, ...env })
      try {
        return requireAllOk(what, await closedLoop({ url: `${bare.url}/v1/store/orders`, headers, connections: CONNECTIONS, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS }))
      } finally {
        await bare.child.stop()
      }
    }
    const bareRun = await bareLoad('bare Fastify server', {})
    const bareLoggingRun = await bareLoad('bare Fastify server, a log line per request', { LOG_EACH_REQUEST: '1' })

    // Not a target: the same load on the project's server with request logging off (LOG_LEVEL=warn),
    // to show what the default per-request info logs cost.
    const quiet = await startServerChild('project server, LOG_LEVEL=warn', 'lib/project-server.ts', { DATABASE_URL: database.url, ...PROJECT_ENV, LOG_LEVEL: 'warn' })
    let quietRun: LoadResult & { warmupRequests: number }
    try {
      quietRun = requireAllOk('project server, LOG_LEVEL=warn', await closedLoop({ url: `${quiet.url}/v1/store/orders`, headers, connections: CONNECTIONS, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS }))
      projectRequests += quietRun.requests + quietRun.warmupRequests
    } finally {
      await quiet.child.stop()
    }

    const rate = (runs: LoadResult[]): number => runs.reduce((sum, run) => sum + run.requests, 0) / runs.reduce((sum, run) => sum + run.seconds, 0)
    const projectRate = rate(projectRuns)
    const rawRate = rate(rawRuns)
    const rounds = roundRatios(
      projectRuns.map((run) => run.perSecond),
      rawRuns.map((run) => run.perSecond),
    )
    section.rows.push(
      {
        measure: `authenticated GET, ${CONNECTIONS} connections (${ROUNDS} paired rounds)`,
        project: fmt.rate(projectRate),
        baseline: fmt.rate(rawRate),
        ratio: fmt.rounds(rounds),
        target: '≥ 0.7×',
        result: verdict(rounds.median >= 0.7),
      },
      {
        measure: 'same, LOG_LEVEL=warn (no request logs)',
        project: fmt.rate(quietRun.perSecond),
        ratio: fmt.ratio(quietRun.perSecond / rawRate),
        result: 'info',
      },
      {
        measure: 'bare Fastify app, same bytes (reference)',
        project: fmt.rate(bareRun.perSecond),
        ratio: fmt.ratio(bareRun.perSecond / rawRate),
        result: 'info',
      },
      {
        measure: 'bare Fastify app + one pino line per request',
        project: fmt.rate(bareLoggingRun.perSecond),
        ratio: fmt.ratio(bareLoggingRun.perSecond / rawRate),
        result: 'info',
      },
      {
        measure: 'latency p50 / p99',
        project: `${projectRuns.at(-1)!.p50Ms} / ${projectRuns.at(-1)!.p99Ms} ms`,
        baseline: `${rawRuns.at(-1)!.p50Ms} / ${rawRuns.at(-1)!.p99Ms} ms`,
        result: 'info',
      },
    )
    if (transactionsBefore !== undefined && database.transactions !== undefined) {
      // Read once the server has closed its pool: a backend reports its statistics when it ends.
      const perRequest = ((await database.transactions()) - transactionsBefore) / projectRequests
      section.rows.push({ measure: 'database transactions per request', project: perRequest.toFixed(2), result: 'info' })
      section.notes.push(
        'Transactions per request counts every statement the server sent to PostgreSQL during the rounds (warm-ups and start-up included), from pg_stat_database.',
      )
    }
    const share = (samples: Record<string, number>[], who: string): string =>
      samples.map((sample) => `${Math.round(sample[who]! * 100)}%`).join(', ')
    section.notes.push(
      `CPU per round, as a share of one core: raw server ${share(rawCpu, 'server')} with autocannon at ${share(rawCpu, 'client')}; ` +
        `project server ${share(projectCpu, 'server')} with autocannon at ${share(projectCpu, 'client')}. A load generator near 100% means the server in question could answer more than it was asked.`,
    )
    section.notes.push(
      `${ROUNDS} rounds of one ${SECONDS}-second run per server (after ${WARMUP_SECONDS} s of warm-up each), raw first in even rounds, project first in odd ones; the body is ${fmt.count(bodyBytes)} bytes. ` +
        `Per round (req/s): project ${projectRuns.map((run) => Math.round(run.perSecond)).join(', ')}; raw ${rawRuns.map((run) => Math.round(run.perSecond)).join(', ')}; ratios ${fmt.roundList(rounds)}. ` +
        'The reference rows are single runs after the rounds, compared with the raw rounds\' pooled rate.',
    )
  } finally {
    rmSync(bodyFile, { force: true })
    await database.drop()
  }
}
