import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { bearer } from '../lib/client.js'
import { WORK_DIR } from '../lib/paths.js'
import { PROJECT_ENV, startServerChild, type RunningChild } from '../lib/processes.js'
import { fmt, median, pairedRounds, roundRatios, verdict } from '../lib/report.js'
import { bigDataset, type StoreContext } from './context.js'

const TIMED_GETS = 7
const CONDITIONAL_GETS = 20

/**
 * Comparison 2: a repeated GET of the unchanged list (served from the project's list cache) versus a
 * raw node:http server (baselines/raw-bytes-server.ts) writing the very same bytes from memory, in
 * paired rounds of one GET each (lib/report.ts). Also the conditional GET (If-None-Match → 304).
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
  const raw: { child?: RunningChild } = {}
  let rounds: { baseline: number[]; project: number[] }
  let notModifiedMs: number[]
  let bytes: number
  let peakRss: number
  try {
    const url = `${project.url}/v1/store/orders`
    const first = await downloader.request(url, { headers, hash: 'raw', saveTo: bodyFile })
    const etag = String(first.headers.etag)
    bytes = first.bytes
    await downloader.request(url, { headers }) // warm-up
    raw.child = await startServerChild('raw node:http server', 'baselines/raw-bytes-server.ts', { BODY_FILE: bodyFile })
    const rawUrl = `${raw.child.url}/v1/store/orders`
    const check = await downloader.request(rawUrl, { headers, hash: 'raw' })
    if (check.sha256 !== first.sha256) throw new Error('the raw server does not send the same bytes')
    rounds = await pairedRounds(
      TIMED_GETS,
      async () => (await downloader.request(rawUrl, { headers })).ms,
      async () => {
        const response = await downloader.request(url, { headers })
        if (response.headers.etag !== etag) throw new Error('the list changed during the bench')
        return response.ms
      },
    )
    notModifiedMs = []
    for (let i = 0; i < CONDITIONAL_GETS; i++) {
      notModifiedMs.push((await downloader.request(url, { headers: { ...headers, 'if-none-match': etag }, expect: 304 })).ms)
    }
    peakRss = project.child.memory().peakRss
  } finally {
    await raw.child?.child.stop()
    await project.child.stop()
    rmSync(bodyFile, { force: true })
  }

  const ratios = roundRatios(rounds.project, rounds.baseline)
  section.rows.push(
    {
      measure: `repeated GET, ${fmt.mb(bytes)} (${TIMED_GETS} paired rounds)`,
      project: fmt.ms(median(rounds.project)),
      baseline: fmt.ms(median(rounds.baseline)),
      ratio: fmt.rounds(ratios),
      target: '≤ 2×',
      result: verdict(ratios.median <= 2),
    },
    { measure: `conditional GET → 304 (median of ${CONDITIONAL_GETS})`, project: fmt.ms(median(notModifiedMs)), result: 'info' },
    { measure: 'server peak RSS (VmHWM)', project: fmt.mib(peakRss), result: 'info' },
  )
  section.notes.push(
    `The first GET (a cache miss, not timed) fills the cache and gives the bytes the raw server then sends; one more untimed GET warms up. Per round (ms): project ${rounds.project.map((ms) => ms.toFixed(0)).join(', ')}; raw ${rounds.baseline.map((ms) => ms.toFixed(0)).join(', ')}; ratios ${fmt.roundList(ratios)}.`,
  )
}
