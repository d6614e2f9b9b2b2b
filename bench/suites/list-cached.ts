import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { bearer } from '../lib/client.js'
import { WORK_DIR } from '../lib/paths.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { fmt, median, verdict } from '../lib/report.js'
import { bigDataset, type StoreContext } from './context.js'

const TIMED_GETS = 7
const CONDITIONAL_GETS = 20

/**
 * Comparison 2: a repeated GET of the unchanged list (served from the project's list cache) versus a
 * raw node:http server (baselines/raw-bytes-server.ts) writing the very same bytes from memory. Also
 * the conditional GET (If-None-Match → 304).
 */
export async function listCached(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const { downloader } = context
  const headers = bearer(big.secret)
  const section = context.report.section('2. Unchanged list, repeated', context.label, 'raw node:http')
  mkdirSync(WORK_DIR, { recursive: true })
  const bodyFile = join(WORK_DIR, `list-${context.kind}.json`)

  // The default cache (256 MiB) holds the 1M list in every encoding; this large a list is kept in a
  // file, not in the process (see src/http/list-cache.ts).
  const project = await startServerChild('project server', 'lib/project-server.ts', { DATABASE_URL: big.database.url, ...PROJECT_ENV })
  let projectRun: { ms: number[]; notModifiedMs: number[]; sha256: string; bytes: number; peakRss: number }
  try {
    const first = await downloader.request(`${project.url}/v1/store/orders`, { headers, hash: 'raw', saveTo: bodyFile })
    const etag = String(first.headers.etag)
    const ms: number[] = []
    await downloader.request(`${project.url}/v1/store/orders`, { headers }) // warm-up
    for (let i = 0; i < TIMED_GETS; i++) {
      const response = await downloader.request(`${project.url}/v1/store/orders`, { headers })
      if (response.headers.etag !== etag) throw new Error('the list changed during the bench')
      ms.push(response.ms)
    }
    const notModifiedMs: number[] = []
    for (let i = 0; i < CONDITIONAL_GETS; i++) {
      notModifiedMs.push((await downloader.request(`${project.url}/v1/store/orders`, { headers: { ...headers, 'if-none-match': etag }, expect: 304 })).ms)
    }
    projectRun = { ms, notModifiedMs, sha256: first.sha256!, bytes: first.bytes, peakRss: project.child.memory().peakRss }
  } finally {
    await project.child.stop()
  }

  const raw = await startServerChild('raw node:http server', 'baselines/raw-bytes-server.ts', { BODY_FILE: bodyFile })
  let rawMs: number[]
  try {
    const check = await downloader.request(`${raw.url}/v1/store/orders`, { headers, hash: 'raw' })
    if (check.sha256 !== projectRun.sha256) throw new Error('the raw server does not send the same bytes')
    rawMs = []
    for (let i = 0; i < TIMED_GETS; i++) rawMs.push((await downloader.request(`${raw.url}/v1/store/orders`, { headers })).ms)
  } finally {
    await raw.child.stop()
    rmSync(bodyFile, { force: true })
  }

  const projectMs = median(projectRun.ms)
  const baselineMs = median(rawMs)
  const ratio = projectMs / baselineMs
  section.rows.push(
    {
      measure: `repeated GET, ${fmt.mb(projectRun.bytes)} (median of ${TIMED_GETS})`,
      project: fmt.ms(projectMs),
      baseline: fmt.ms(baselineMs),
      ratio: fmt.ratio(ratio),
      target: '≤ 2×',
      result: verdict(ratio <= 2),
    },
    { measure: `conditional GET → 304 (median of ${CONDITIONAL_GETS})`, project: fmt.ms(median(projectRun.notModifiedMs)), result: 'info' },
    { measure: 'server peak RSS (VmHWM)', project: fmt.mib(projectRun.peakRss), result: 'info' },
  )
  section.notes.push(
    `The first GET (a cache miss, not timed) fills the cache and gives the bytes the raw server then sends; one more untimed GET warms up. All timings (ms): project ${projectRun.ms.map((ms) => ms.toFixed(0)).join(', ')}; raw ${rawMs.map((ms) => ms.toFixed(0)).join(', ')}.`,
  )
}
