/**
 * Child process: an OTLP/HTTP trace receiver on 127.0.0.1 (port 0) that only counts, for the tracing
 * comparison: `POST /v1/traces` is read to its end and dropped, then answered 200, with an empty
 * ExportTraceServiceResponse (an empty body) to `application/x-protobuf` and `{}` to JSON, as a
 * collector that accepted every span would. It keeps the requests and the body bytes (as they came,
 * compressed or not), and the spans of an uncompressed protobuf body, counted by walking the three
 * levels of length-delimited fields down to each span without decoding one; any other body's spans
 * are not counted (`uncounted`). Anything else is answered 404. IPC: `{type: 'stats'}` is answered
 * with `{type: 'stats', ...SinkStats}`, the totals since the sink started.
 */
import { createServer } from 'node:http'
import { failed, onShutdown, tell } from './child-side.js'

export interface SinkStats {
  /** `POST /v1/traces` requests answered 200. */
  requests: number
  /** Their body bytes, as received. */
  bytes: number
  /** Spans in the bodies that were counted (uncompressed protobuf). */
  spans: number
  /** Requests whose spans were not counted: JSON or compressed bodies. */
  uncounted: number
  /** Requests to anything but `POST /v1/traces` (answered 404). */
  other: number
}

const stats: SinkStats = { requests: 0, bytes: 0, spans: 0, uncounted: 0, other: 0 }

/**
 * Calls `each(field, start, end)` for every length-delimited field of the protobuf message in
 * `buffer[start, end)`, skipping the others; throws on a malformed message.
 */
function lengthDelimited(buffer: Buffer, start: number, end: number, each: (field: number, start: number, end: number) => void): void {
  let at = start
  const varint = (): number => {
    let value = 0
    let scale = 1
    for (;;) {
      if (at >= end) throw new Error('truncated protobuf varint')
      const byte = buffer[at++]!
      value += (byte & 0x7f) * scale
      if (byte < 0x80) return value
      scale *= 128
    }
  }
  while (at < end) {
    const tag = varint()
    switch (tag & 7) {
      case 0:
        varint()
        break
      case 1:
        at += 8
        break
      case 2: {
        const length = varint()
        if (at + length > end) throw new Error('truncated protobuf field')
        each(Math.floor(tag / 8), at, at + length)
        at += length
        break
      }
      case 5:
        at += 4
        break
      default:
        throw new Error(`unexpected protobuf wire type ${tag & 7}`)
    }
  }
  if (at !== end) throw new Error('truncated protobuf message')
}

/** ExportTraceServiceRequest.resource_spans (1) → ResourceSpans.scope_spans (2) → ScopeSpans.spans (2). */
function countSpans(body: Buffer): number {
  let spans = 0
  lengthDelimited(body, 0, body.length, (field, start, end) => {
    if (field !== 1) return
    lengthDelimited(body, start, end, (field, start, end) => {
      if (field !== 2) return
      lengthDelimited(body, start, end, (field) => {
        if (field === 2) spans++
      })
    })
  })
  return spans
}

try {
  const server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0]
    if (request.method !== 'POST' || path !== '/v1/traces') {
      stats.other++
      request.resume()
      response.writeHead(404, { 'content-length': '0' }).end()
      return
    }
    const json = (request.headers['content-type'] ?? '').startsWith('application/json')
    const countable = !json && (request.headers['content-encoding'] ?? 'identity') === 'identity'
    const chunks: Buffer[] = []
    let bytes = 0
    request.on('data', (chunk: Buffer) => {
      bytes += chunk.length
      if (countable) chunks.push(chunk)
    })
    request.on('end', () => {
      stats.requests++
      stats.bytes += bytes
      if (countable) stats.spans += countSpans(Buffer.concat(chunks))
      else stats.uncounted++
      if (json) response.writeHead(200, { 'content-type': 'application/json', 'content-length': '2' }).end('{}')
      else response.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end()
    })
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('no port')
    tell({ type: 'ready', url: `http://127.0.0.1:${address.port}` })
  })
  process.on('message', (message: { type: string }) => {
    if (message.type === 'stats') tell({ type: 'stats', ...stats })
  })
  onShutdown(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
} catch (error) {
  failed(error)
}
