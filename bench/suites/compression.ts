import { bearer } from '../lib/client.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { fmt, median, verdict, type Row } from '../lib/report.js'
import { bigDataset, bumpVersion, type StoreContext } from './context.js'

const ROUNDS = 7
const CACHED_GETS = 3
const ENCODINGS = ['identity', 'gzip', 'br'] as const
type Encoding = (typeof ENCODINGS)[number]
/** A compressed cache miss may take this many times the identity one. */
const TARGETS = { gzip: 1.5, br: 1 } as const

function acceptEncoding(encoding: Encoding): Record<string, string> {
  return encoding === 'identity' ? {} : { 'accept-encoding': encoding }
}

/**
 * Comparison 3: the full list with Accept-Encoding gzip and br versus without, all cache misses of the
 * same data version (a round is: one cancel through the API, then identity, gzip and br, in an order
 * that rotates, so that none is always the first after the change), timed to the last byte on the
 * wire. A first round, before them, is reported apart (a server just started). gzip is a plain zlib
 * stream at level 1 and may take up to 1.5× the identity miss; br, at quality 1, no longer than it.
 * Then the cached representations, and a check that each compressed body decodes to the identity body.
 */
export async function compression(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const { downloader } = context
  const headers = bearer(big.secret)
  const section = context.report.section('3. Compression', context.label, 'uncompressed')
  const server = await startServerChild('project server', 'lib/project-server.ts', { DATABASE_URL: big.database.url, ...PROJECT_ENV })
  const first: Record<Encoding, number> = { identity: 0, gzip: 0, br: 0 }
  const cold: Record<Encoding, number[]> = { identity: [], gzip: [], br: [] }
  const cached: Record<Encoding, number[]> = { identity: [], gzip: [], br: [] }
  const bytes: Record<Encoding, number> = { identity: 0, gzip: 0, br: 0 }
  let peakRss: number
  try {
    const url = `${server.url}/v1/store/orders`
    for (let round = -1; round < ROUNDS; round++) {
      await bumpVersion(context, server.url)
      const order = round < 0 ? ENCODINGS : ENCODINGS.map((_, i) => ENCODINGS[(i + round) % ENCODINGS.length]!)
      for (const encoding of order) {
        const response = await downloader.request(url, { headers: { ...headers, ...acceptEncoding(encoding) } })
        const coding = response.headers['content-encoding'] ?? 'identity'
        if (coding !== encoding) throw new Error(`asked for ${encoding}, got Content-Encoding ${coding}`)
        if (round < 0) first[encoding] = response.ms
        else cold[encoding].push(response.ms)
        bytes[encoding] = response.bytes
      }
    }
    for (const encoding of ENCODINGS) {
      for (let i = 0; i < CACHED_GETS; i++) cached[encoding].push((await downloader.request(url, { headers: { ...headers, ...acceptEncoding(encoding) } })).ms)
    }
    // Not timed: every representation decodes to the same list.
    const digests = await Promise.all(
      ENCODINGS.map(async (encoding) => (await downloader.request(url, { headers: { ...headers, ...acceptEncoding(encoding) }, hash: 'decoded' })).sha256),
    )
    if (new Set(digests).size !== 1) throw new Error('a compressed list does not decode to the uncompressed one')
    peakRss = server.child.memory().peakRss
  } finally {
    await server.child.stop()
  }

  const identityMs = median(cold.identity)
  const rows: Row[] = [
    { measure: `identity, cache miss (median of ${ROUNDS})`, project: fmt.ms(identityMs), baseline: fmt.mb(bytes.identity), result: 'info' },
  ]
  for (const encoding of ['gzip', 'br'] as const) {
    const ms = median(cold[encoding])
    const limit = TARGETS[encoding]
    rows.push({
      measure: `${encoding}, cache miss (median of ${ROUNDS}), ${fmt.mb(bytes[encoding])}`,
      project: fmt.ms(ms),
      baseline: fmt.ms(identityMs),
      ratio: fmt.ratio(ms / identityMs),
      target: `≤ ${limit}× uncompressed`,
      result: verdict(ms <= limit * identityMs),
    })
  }
  rows.push({
    measure: 'gzip, first list after start',
    project: fmt.ms(first.gzip),
    baseline: fmt.ms(first.identity),
    ratio: fmt.ratio(first.gzip / first.identity),
    result: 'info',
  })
  for (const encoding of ENCODINGS) {
    rows.push({ measure: `${encoding}, cached (median of ${CACHED_GETS})`, project: fmt.ms(median(cached[encoding])), result: 'info' })
  }
  rows.push({ measure: 'server peak RSS (VmHWM)', project: fmt.mib(peakRss), result: 'info' })
  section.rows.push(...rows)
  section.notes.push(
    `First round (ms): identity ${first.identity.toFixed(0)}, gzip ${first.gzip.toFixed(0)}, br ${first.br.toFixed(0)}. ` +
      `Cache-miss timings (ms): identity ${cold.identity.map((ms) => ms.toFixed(0)).join(', ')}; gzip ${cold.gzip.map((ms) => ms.toFixed(0)).join(', ')}; br ${cold.br.map((ms) => ms.toFixed(0)).join(', ')}. The client does not decode while timed.`,
  )
}
