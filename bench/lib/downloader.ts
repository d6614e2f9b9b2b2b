/**
 * Child process: the client of the big-list benches. It runs one HTTP request at a time, on demand
 * of the bench process, and reads each response to its end as fast as the server sends it — without
 * decoding it unless asked — so that the bench process (which runs autocannon meanwhile) and this
 * reader never slow each other down. Connections are kept alive between requests.
 */
import { createHash } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { Agent, request, type IncomingHttpHeaders } from 'node:http'
import { Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createBrotliDecompress, createGunzip } from 'node:zlib'
import { failed, onShutdown, tell } from './child-side.js'

export interface DownloadRequest {
  type: 'request'
  id: number
  url: string
  method?: 'GET' | 'DELETE'
  headers?: Record<string, string>
  /** SHA-256 of the body as sent ('raw') or after undoing its Content-Encoding ('decoded'). */
  hash?: 'raw' | 'decoded'
  /** Also write the body, as sent, to this file. */
  saveTo?: string
}

export interface DownloadResult {
  type: 'response'
  id: number
  status: number
  headers: IncomingHttpHeaders
  /** Bytes on the wire (after content coding, before any decoding). */
  bytes: number
  /** From sending the request to the last byte of the body. */
  ms: number
  /** From sending the request to the status line and headers. */
  ttfbMs: number
  sha256?: string
  decodedBytes?: number
  error?: string
}

/**
 * Walks a feed of JSON pages `{"data": […], "nextCursor": "…"}` on one connection: the first page
 * from `url`, each next one from `url` with `param` set to the previous page's `nextCursor`, until a
 * page's `data` is empty (or it has no `nextCursor`: the v2 list's last page). Pages are read to their last byte and scanned
 * for those two fields without being parsed, so the client's cost stays small against the server's.
 */
export interface WalkRequest {
  type: 'walk'
  id: number
  url: string
  headers?: Record<string, string>
  param: string
  /**
   * Occurrences of this text in a page count as its items, e.g. `"type":"order.` for events; without
   * it pages are only read (the timed walks: a v1 list is timed reading its bytes, no more).
   */
  itemMarker?: string
  /** Also report the nextCursor of this page (1: the first). */
  cursorAtPage?: number
}

export interface WalkResult {
  type: 'walked'
  id: number
  /** Pages read, the last (empty) one included. */
  pages: number
  /** Items counted with `itemMarker`, over every page (0 without one). */
  items: number
  /** Body bytes on the wire, over every page. */
  bytes: number
  /** From sending the first request to the last byte of the empty page. */
  ms: number
  /** The last page's nextCursor: where a consumer would resume. */
  cursor?: string
  /** The nextCursor of page `cursorAtPage`, when asked. */
  cursorAt?: string
  error?: string
}

const agent = new Agent({ keepAlive: true, maxSockets: 1, timeout: 4000 }) // idle sockets closed before the server's 5 s (see probe.ts)

function download(job: DownloadRequest): Promise<DownloadResult> {
  return new Promise((resolve) => {
    const started = process.hrtime.bigint()
    const elapsed = (): number => Number(process.hrtime.bigint() - started) / 1e6
    const fail = (error: unknown): void =>
      resolve({ type: 'response', id: job.id, status: 0, headers: {}, bytes: 0, ms: elapsed(), ttfbMs: 0, error: String(error) })
    const req = request(job.url, { method: job.method ?? 'GET', headers: job.headers, agent }, (res) => {
      const ttfbMs = elapsed()
      let bytes = 0
      let decodedBytes = 0
      const hash = createHash('sha256')
      const sinks: Promise<void>[] = []
      if (job.saveTo !== undefined) {
        const file = createWriteStream(job.saveTo)
        res.on('data', (chunk: Buffer) => file.write(chunk))
        sinks.push(new Promise((done, error) => res.on('end', () => file.end(done)).on('error', error)))
      }
      if (job.hash === 'decoded') {
        const coding = res.headers['content-encoding']
        const decoder = coding === 'gzip' ? createGunzip() : coding === 'br' ? createBrotliDecompress() : undefined
        const sink = new Writable({
          write(chunk: Buffer, _encoding, callback) {
            decodedBytes += chunk.length
            hash.update(chunk)
            callback()
          },
        })
        res.on('data', (chunk: Buffer) => (bytes += chunk.length))
        sinks.push(decoder === undefined ? pipeline(res, sink) : pipeline(res, decoder, sink))
      } else {
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length
          if (job.hash === 'raw') hash.update(chunk)
        })
        sinks.push(new Promise((done, error) => res.on('end', done).on('error', error)))
      }
      Promise.all(sinks).then(() => {
        const result: DownloadResult = { type: 'response', id: job.id, status: res.statusCode ?? 0, headers: res.headers, bytes, ms: elapsed(), ttfbMs }
        if (job.hash !== undefined) result.sha256 = hash.digest('hex')
        if (job.hash === 'decoded') result.decodedBytes = decodedBytes
        resolve(result)
      }, fail)
    })
    req.on('error', fail)
    req.end()
  })
}

/** One GET, its body kept (a feed page is small). */
function getBody(url: string, headers: Record<string, string> | undefined): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, agent }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

const NEXT_CURSOR = Buffer.from('"nextCursor":"')
/** How an empty page starts (every page starts with its data). */
const EMPTY_PAGE = Buffer.from('{"data":[]')

async function walk(job: WalkRequest): Promise<WalkResult> {
  const started = process.hrtime.bigint()
  const elapsed = (): number => Number(process.hrtime.bigint() - started) / 1e6
  const marker = job.itemMarker === undefined ? undefined : Buffer.from(job.itemMarker)
  type Pending = { url: URL; body: Promise<{ status: number; body: Buffer }> }
  const get = (after: string | undefined): Pending => {
    const url = new URL(job.url)
    if (after !== undefined) url.searchParams.set(job.param, after)
    const body = getBody(url.toString(), job.headers)
    body.catch(() => {}) // awaited by the loop, unless a check of the page before ends it first
    return { url, body }
  }
  let pages = 0
  let items = 0
  let bytes = 0
  let cursor: string | undefined
  let cursorAt: string | undefined
  try {
    for (let request: Pending | undefined = get(undefined); request !== undefined; ) {
      const { status, body } = (await request.body) as { status: number; body: Buffer }
      if (status !== 200) throw new Error(`GET ${request.url.pathname}${request.url.search}: status ${status}: ${body.subarray(0, 300).toString()}`)
      pages++
      bytes += body.length
      // What the next request needs is read from the page's ends; the next page is then asked for
      // before this one's items are counted (a scan of every byte), which overlaps the server's work.
      const empty = body.subarray(0, EMPTY_PAGE.length).equals(EMPTY_PAGE)
      const at: number = body.lastIndexOf(NEXT_CURSOR)
      const next: string | undefined = at < 0 ? undefined : body.toString('utf8', at + NEXT_CURSOR.length, body.indexOf(0x22, at + NEXT_CURSOR.length))
      if (!empty && next !== undefined && next === cursor) throw new Error(`page ${pages}: nextCursor did not move (${next})`)
      if (next !== undefined) cursor = next
      if (pages === job.cursorAtPage) cursorAt = next
      request = next === undefined || empty ? undefined : get(next)
      if (marker === undefined) continue
      let pageItems = 0
      for (let i = body.indexOf(marker); i >= 0; i = body.indexOf(marker, i + marker.length)) pageItems++
      items += pageItems
      if (empty !== (pageItems === 0)) throw new Error(`page ${pages}: ${pageItems} items marked ${job.itemMarker}, but its data is ${empty ? '' : 'not '}empty`)
    }
    return { type: 'walked', id: job.id, pages, items, bytes, ms: elapsed(), cursor, cursorAt }
  } catch (error) {
    return { type: 'walked', id: job.id, pages, items, bytes, ms: elapsed(), cursor, error: String(error) }
  }
}

try {
  // One request (or walk) at a time, in the order asked.
  let queue = Promise.resolve()
  process.on('message', (job: DownloadRequest | WalkRequest) => {
    if (job.type === 'request') queue = queue.then(async () => tell({ ...(await download(job)) }))
    else if (job.type === 'walk') queue = queue.then(async () => tell({ ...(await walk(job)) }))
  })
  onShutdown(() => agent.destroy())
  tell({ type: 'ready' })
} catch (error) {
  failed(error)
}
