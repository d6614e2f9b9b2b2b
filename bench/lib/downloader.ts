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

try {
  // One request at a time, in the order asked.
  let queue = Promise.resolve()
  process.on('message', (job: DownloadRequest) => {
    if (job.type !== 'request') return
    queue = queue.then(async () => tell({ ...(await download(job)) }))
  })
  onShutdown(() => agent.destroy())
  tell({ type: 'ready' })
} catch (error) {
  failed(error)
}
