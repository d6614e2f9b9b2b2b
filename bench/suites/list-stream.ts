import { bearer } from '../lib/client.js'
import { steadyProbe, type ProbeResult } from '../lib/probe.js'
import { PROJECT_ENV, startServerChild, type RunningChild } from '../lib/processes.js'
import { fmt, median, pairedRounds, roundRatios, verdict } from '../lib/report.js'
import { bigDataset, bumpVersion, type StoreContext } from './context.js'

const TIMED_GETS = 3
const GETS_UNDER_SMALL_LOAD = 2
const SMALL_RATE = 200 // requests per second

/**
 * Comparison 1: the full list streamed by the project's server versus the naive baseline
 * (baselines/naive-list-server.ts) that reads every row and builds one string, in paired rounds of
 * one GET each (lib/report.ts). Every timed GET of the project is a cache miss: an order is cancelled
 * through the API first, so the list is filled from the database into a file of the list cache while
 * the response follows that file (as in production). Also: small requests' p99 while big lists
 * stream, and the project's memory with its list cache off.
 */
export async function listStream(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const { downloader } = context
  const env = { DATABASE_URL: big.database.url }
  const headers = bearer(big.secret)
  const section = context.report.section('1. Full list, streamed (cache miss)', context.label, 'naive baseline')
  section.notes.push(`${fmt.count(big.orders)} orders; GET /v1/store/orders read to its last byte by a separate client process.`)

  // Both servers run side by side: a reference body from the naive server, the same bytes from the
  // project's, the timed GETs in paired rounds, then each under a small-request load.
  const naive = await startServerChild('naive list server', 'baselines/naive-list-server.ts', env)
  const servers: { project?: RunningChild } = {}
  let naiveRun: { small: ProbeResult; peakRss: number; finalPeakRss: number; idleRss: number; bytes: number }
  let projectRun: { small: ProbeResult; peakRss: number; idleRss: number }
  let rounds: { baseline: number[]; project: number[] }
  try {
    const naiveIdleRss = naive.child.memory().rss
    const reference = await downloader.request(`${naive.url}/v1/store/orders`, { headers, hash: 'raw' })
    // The naive server's figure is its peak for this one GET: its peak grows with each further GET as
    // the garbage collector lets the heap grow (up to twice as high), which would flatter the project.
    const naivePeakRss = naive.child.memory().peakRss

    const project = (servers.project = await startServerChild('project server', 'lib/project-server.ts', { ...env, ...PROJECT_ENV }))
    const projectIdleRss = project.child.memory().rss
    // Same data as the naive server's: the bodies must be the same bytes.
    const check = await downloader.request(`${project.url}/v1/store/orders`, { headers, hash: 'raw' })
    if (check.sha256 !== reference.sha256) {
      throw new Error(`the project's list (${check.bytes} bytes) differs from the naive one (${reference.bytes} bytes)`)
    }
    rounds = await pairedRounds(
      TIMED_GETS,
      async () => (await downloader.request(`${naive.url}/v1/store/orders`, { headers })).ms,
      async () => {
        await bumpVersion(context, project.url)
        return (await downloader.request(`${project.url}/v1/store/orders`, { headers })).ms
      },
    )
    // The naive server blocks its event loop for seconds per list, and some of the requests that
    // pile up meanwhile are reset: that is the baseline's behaviour, reported below, not an error.
    const naiveSmall = await smallRequestsDuring(naive, headers, async () => {
      for (let i = 0; i < GETS_UNDER_SMALL_LOAD; i++) await downloader.request(`${naive.url}/v1/store/orders`, { headers })
    }, { failuresAllowed: true })
    naiveRun = { small: naiveSmall, idleRss: naiveIdleRss, peakRss: naivePeakRss, finalPeakRss: naive.child.memory().peakRss, bytes: reference.bytes }
    const projectSmall = await smallRequestsDuring(project, headers, async () => {
      for (let i = 0; i < GETS_UNDER_SMALL_LOAD; i++) {
        await bumpVersion(context, project.url)
        await downloader.request(`${project.url}/v1/store/orders`, { headers })
      }
    })
    projectRun = { small: projectSmall, idleRss: projectIdleRss, peakRss: project.child.memory().peakRss }
  } finally {
    await servers.project?.child.stop()
    await naive.child.stop()
  }

  // The same streaming with LIST_CACHE_MAX_BYTES=0: what the cache's copy of the list costs in memory.
  const uncached = await startServerChild('project server, no list cache', 'lib/project-server.ts', { ...env, ...PROJECT_ENV, LIST_CACHE_MAX_BYTES: '0' })
  let uncachedRun: { ms: number; peakRss: number; small: ProbeResult }
  try {
    const ms: number[] = []
    const small = await smallRequestsDuring(uncached, headers, async () => {
      for (let i = 0; i < GETS_UNDER_SMALL_LOAD; i++) {
        await bumpVersion(context, uncached.url)
        ms.push((await downloader.request(`${uncached.url}/v1/store/orders`, { headers })).ms)
      }
    })
    uncachedRun = { ms: median(ms), peakRss: uncached.child.memory().peakRss, small }
  } finally {
    await uncached.child.stop()
  }

  const projectMs = median(rounds.project)
  const naiveMs = median(rounds.baseline)
  const speedup = roundRatios(rounds.project, rounds.baseline, (project, naive) => naive / project)
  const memoryRatio = projectRun.peakRss / naiveRun.peakRss
  section.rows.push(
    {
      measure: `time to last byte (${TIMED_GETS} paired rounds)`,
      project: fmt.ms(projectMs),
      baseline: fmt.ms(naiveMs),
      ratio: fmt.rounds(speedup, ' faster'),
      target: '≥ 3× faster',
      result: verdict(speedup.median >= 3),
    },
    {
      measure: `server peak RSS (VmHWM): project over ${1 + TIMED_GETS + GETS_UNDER_SMALL_LOAD} GETs, naive over 1`,
      project: fmt.mib(projectRun.peakRss),
      baseline: fmt.mib(naiveRun.peakRss),
      ratio: fmt.ratio(memoryRatio),
      target: '≤ 0.15×',
      result: verdict(memoryRatio <= 0.15),
    },
    {
      measure: `small-request p99 during big lists (${SMALL_RATE}/s)`,
      project: fmt.ms(projectRun.small.p99Ms),
      baseline: fmt.ms(naiveRun.small.p99Ms),
      target: '< 50 ms',
      result: verdict(projectRun.small.p99Ms < 50),
    },
    { measure: `naive peak RSS after all its ${1 + TIMED_GETS + GETS_UNDER_SMALL_LOAD} GETs`, project: '', baseline: fmt.mib(naiveRun.finalPeakRss), result: 'info' },
    { measure: 'server RSS when idle, after start', project: fmt.mib(projectRun.idleRss), baseline: fmt.mib(naiveRun.idleRss), result: 'info' },
    { measure: 'list size', project: fmt.mb(naiveRun.bytes), baseline: fmt.mb(naiveRun.bytes), result: 'info' },
    {
      measure: 'throughput of one stream',
      project: `${(naiveRun.bytes / 1e6 / (projectMs / 1000)).toFixed(0)} MB/s`,
      baseline: `${(naiveRun.bytes / 1e6 / (naiveMs / 1000)).toFixed(0)} MB/s`,
      result: 'info',
    },
    {
      measure: `LIST_CACHE_MAX_BYTES=0: time (median of ${GETS_UNDER_SMALL_LOAD})`,
      project: fmt.ms(uncachedRun.ms),
      ratio: `${fmt.ratio(naiveMs / uncachedRun.ms)} faster`,
      result: 'info',
    },
    {
      measure: 'LIST_CACHE_MAX_BYTES=0: peak RSS',
      project: fmt.mib(uncachedRun.peakRss),
      ratio: fmt.ratio(uncachedRun.peakRss / naiveRun.peakRss),
      result: 'info',
    },
    { measure: 'LIST_CACHE_MAX_BYTES=0: small-request p99', project: fmt.ms(uncachedRun.small.p99Ms), result: 'info' },
  )
  section.notes.push(
    `Each timed project GET follows a cancel through the API, so it is a cache miss: the list is filled from the database into a file, which the response follows as it grows; with the default LIST_CACHE_MAX_BYTES (256 MiB) that file is then cached.`,
    `Small requests: authenticated GET /v1/pets/{id} (one indexed read) sent at a steady ${SMALL_RATE}/s (open loop, each timed from when it was due) while ${GETS_UNDER_SMALL_LOAD} full lists are read back to back. ` +
      `Project: ${fmt.count(projectRun.small.requests)} requests, p50 ${fmt.ms(projectRun.small.p50Ms)}, max ${fmt.ms(projectRun.small.maxMs)}, none failed; naive: ${fmt.count(naiveRun.small.requests)} requests, p50 ${fmt.ms(naiveRun.small.p50Ms)}, max ${fmt.ms(naiveRun.small.maxMs)}` +
        (naiveRun.small.failures > 0 ? `, ${fmt.count(naiveRun.small.failures)} failed (${JSON.stringify(naiveRun.small.failureReasons)}), which the naive p99 leaves out.` : ', none failed.'),
    `Per round (ms): project ${rounds.project.map((ms) => ms.toFixed(0)).join(', ')}; naive ${rounds.baseline.map((ms) => ms.toFixed(0)).join(', ')}; speedups ${fmt.roundList(speedup)}.`,
  )
}

/** Small authenticated requests at a steady rate for as long as `work` runs. */
async function smallRequestsDuring(
  server: RunningChild,
  headers: Record<string, string>,
  work: () => Promise<void>,
  { failuresAllowed = false } = {},
): Promise<ProbeResult> {
  const probe = steadyProbe({ url: `${server.url}/v1/pets/42`, headers, rate: SMALL_RATE })
  let result: ProbeResult
  try {
    await work()
  } finally {
    result = await probe.stop()
  }
  if (result.failures > 0 && !failuresAllowed) throw new Error(`${result.failures} of ${result.requests} small requests failed during big lists: ${JSON.stringify(result.failureReasons)}`)
  return result
}
