import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { isAbsolute, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { gunzip as gunzipCallback } from 'node:zlib'
import { isInteger, isSafeNumber, parse as parseLossless } from 'lossless-json'
import protobuf from 'protobufjs'

/**
 * An OTLP/HTTP trace receiver for tests (https://opentelemetry.io/docs/specs/otlp/#otlphttp): a real
 * HTTP server on 127.0.0.1 that takes `POST /v1/traces` in binary protobuf and in OTLP JSON, gzipped
 * or not, and keeps every span it is sent, decoded into one shape whichever encoding carried it.
 * A server under test points at it with `OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url`.
 */

/** An attribute's value: an OTLP `AnyValue`, with an int64 a number when it is safe, else a bigint. */
type AttributeValue = string | number | boolean | bigint | Uint8Array | AttributeValue[] | { [key: string]: AttributeValue } | null
type Attributes = Record<string, AttributeValue>

export interface ReceivedSpan {
  /** 32 lowercase hex digits. */
  traceId: string
  /** 16 lowercase hex digits. */
  spanId: string
  /** 16 lowercase hex digits, or '' for a root span. */
  parentSpanId: string
  name: string
  /** OTLP `SpanKind`: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number
  attributes: Attributes
  links: { traceId: string; spanId: string; attributes: Attributes }[]
  /** OTLP `StatusCode`: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string }
  startTimeUnixNano: bigint
  endTimeUnixNano: bigint
  /** The resource's attributes (`service.name`, ...). */
  resource: Attributes
  /** The instrumentation scope's name. */
  scope: string
  /** Which encoding carried it. */
  encoding: 'protobuf' | 'json'
}

interface ReceivedRequest {
  method: string
  path: string
  /** The Content-Type header as sent ('' when there was none). */
  contentType: string
  /** The Content-Encoding header, when there was one. */
  encoding?: string
  /** Every header as sent, names in lowercase (the exporter's own, from OTEL_EXPORTER_OTLP_HEADERS). */
  headers: IncomingHttpHeaders
  /** The status the receiver answered with. */
  status: number
}

export interface OtlpReceiver {
  /** The base URL, e.g. http://127.0.0.1:PORT: the value for OTEL_EXPORTER_OTLP_ENDPOINT (traces go to `${url}/v1/traces`). */
  url: string
  /** Every span received so far, in the order they arrived. */
  spans: ReceivedSpan[]
  /** Every request received so far, accepted or not. */
  requests: ReceivedRequest[]
  /**
   * Resolves with (a copy of) the spans once `predicate(spans)` is true, checked now and again each
   * time a request brings spans; rejects after `timeoutMs` (default 30000) naming the spans seen, or
   * when the receiver is closed first.
   */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>
  close(): Promise<void>
}

const PROTO_ROOT = fileURLToPath(new URL('../fixtures/otlp/', import.meta.url))
const PROTOBUF = 'application/x-protobuf'
const JSON_TYPE = 'application/json'
/** google.rpc.Code INVALID_ARGUMENT, for the Status body of a 400. */
const INVALID_ARGUMENT = 3

const gunzip = promisify(gunzipCallback)

/** A request the receiver refuses: `status` with `message`. */
class Refusal extends Error {
  /** The request's encoding, once known: the body of the answer is then a google.rpc.Status in it. */
  encoding?: ReceivedSpan['encoding']

  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

function badRequest(message: string): never {
  throw new Refusal(400, message)
}

let types: { request: protobuf.Type; status: protobuf.Type } | undefined

/** ExportTraceServiceRequest from the vendored .proto files (loaded once), and google.rpc.Status for error bodies. */
function protoTypes(): { request: protobuf.Type; status: protobuf.Type } {
  if (types === undefined) {
    const root = new protobuf.Root()
    // The files import one another by their path from the proto root, not relative to each other.
    root.resolvePath = (_origin, target) => (isAbsolute(target) ? target : join(PROTO_ROOT, target))
    root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto')
    root.resolveAll()
    // google/rpc/status.proto without its `details` (a repeated google.protobuf.Any, always empty here).
    const status = new protobuf.Type('Status').add(new protobuf.Field('code', 1, 'int32')).add(new protobuf.Field('message', 2, 'string'))
    new protobuf.Root().define('google.rpc').add(status)
    types = { request: root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest'), status }
  }
  return types
}

/** ExportTraceServiceRequest, from the vendored .proto files: for a test that writes a request by hand. */
export function exportTraceServiceRequestType(): protobuf.Type {
  return protoTypes().request
}

/**
 * An ExportTraceServiceRequest in protobuf as a plain object in OTLP JSON's shape (camelCase
 * names), with bytes as Buffers and 64-bit integers as bigints.
 */
function decodeProtobuf(body: Buffer): unknown {
  const { request } = protoTypes()
  let message: protobuf.Message
  try {
    message = request.decode(body)
  } catch (error) {
    badRequest(`not an ExportTraceServiceRequest in protobuf: ${(error as Error).message}`)
  }
  return request.toObject(message, { longs: BigInt })
}

/** An OTLP JSON body, with each integer a number when it is safe and a bigint when it is not (so none is rounded). */
function decodeJson(body: Buffer): unknown {
  try {
    return parseLossless(body.toString('utf8'), null, (text) => (isInteger(text) && !isSafeNumber(text) ? BigInt(text) : Number(text)))
  } catch (error) {
    badRequest(`not JSON: ${(error as Error).message}`)
  }
}

// Readers of the decoded request, the same for both encodings: protobuf's toObject names fields as
// OTLP JSON does and leaves out what was not sent, as OTLP JSON may; they differ in bytes (Buffers
// against hex strings for ids and base64 for bytesValue) and in integers (bigints against numbers or
// decimal strings).

type Json = Record<string, unknown>

function object(value: unknown, what: string): Json {
  if (value === undefined || value === null) return {}
  if (typeof value !== 'object' || Array.isArray(value) || value instanceof Uint8Array) badRequest(`${what} is not an object`)
  return value as Json
}

function list(value: unknown, what: string): unknown[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value)) badRequest(`${what} is not an array`)
  return value
}

function string(value: unknown, what: string): string {
  if (value === undefined || value === null) return ''
  if (typeof value !== 'string') badRequest(`${what} is not a string`)
  return value
}

/** An int64 or fixed64: a bigint, an integer number, or a decimal string (OTLP JSON may send either). */
function int64(value: unknown, what: string): bigint {
  if (value === undefined || value === null) return 0n
  if (typeof value === 'bigint') return value
  if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value)
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return BigInt(value)
  badRequest(`${what} is not an integer: ${String(value)}`)
}

/** An enum (OTLP JSON sends their numbers, never their names) or an int32. */
function int32(value: unknown, what: string): number {
  const n = int64(value, what)
  if (n < -(2n ** 31n) || n >= 2n ** 31n) badRequest(`${what} is out of range: ${n}`)
  return Number(n)
}

function double(value: unknown, what: string): number {
  if (typeof value === 'number') return value
  if (typeof value === 'bigint') return Number(value)
  if (typeof value === 'string' && /^(NaN|-?Infinity|-?\d+(\.\d+)?([eE][+-]?\d+)?)$/.test(value)) return Number(value)
  badRequest(`${what} is not a number: ${String(value)}`)
}

/** A trace or span id: bytes in protobuf, hex in OTLP JSON; returned as lowercase hex. '' is allowed where `optional`. */
function id(value: unknown, bytes: 8 | 16, what: string, optional = false): string {
  let hex: string
  if (value instanceof Uint8Array) hex = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')
  else if (typeof value === 'string' && /^[0-9a-fA-F]*$/.test(value)) hex = value.toLowerCase()
  else if (value === undefined || value === null) hex = ''
  else badRequest(`${what} is neither bytes nor hex: ${String(value)}`)
  if (hex.length === bytes * 2 || (optional && hex === '')) return hex
  badRequest(`${what} is not ${bytes} bytes: "${hex}"`)
}

function anyValue(value: unknown, what: string): AttributeValue {
  const any = object(value, what)
  if ('stringValue' in any) return string(any.stringValue, what)
  if ('boolValue' in any) {
    if (typeof any.boolValue !== 'boolean') badRequest(`${what} is not a boolean`)
    return any.boolValue
  }
  if ('intValue' in any) {
    const n = int64(any.intValue, what)
    return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n
  }
  if ('doubleValue' in any) return double(any.doubleValue, what)
  if ('arrayValue' in any) return list(object(any.arrayValue, what).values, what).map((item, i) => anyValue(item, `${what}[${i}]`))
  if ('kvlistValue' in any) return keyValues(object(any.kvlistValue, what).values, what)
  if ('bytesValue' in any) {
    if (any.bytesValue instanceof Uint8Array) return new Uint8Array(any.bytesValue)
    if (typeof any.bytesValue === 'string') return new Uint8Array(Buffer.from(any.bytesValue, 'base64'))
    badRequest(`${what} is not bytes`)
  }
  return null
}

/** A list of KeyValue as an object (a later key wins); set with defineProperty so that a key such as "__proto__" is only a key. */
function keyValues(value: unknown, what: string): Attributes {
  const attributes: Attributes = {}
  for (const item of list(value, what)) {
    const keyValue = object(item, what)
    const key = string(keyValue.key, `a key in ${what}`)
    Object.defineProperty(attributes, key, { value: anyValue(keyValue.value, `${what}.${key}`), enumerable: true, writable: true, configurable: true })
  }
  return attributes
}

/** Every span of an ExportTraceServiceRequest (decoded from either encoding), in one shape. */
function spansOf(request: unknown, encoding: ReceivedSpan['encoding']): ReceivedSpan[] {
  const spans: ReceivedSpan[] = []
  for (const resourceSpans of list(object(request, 'the request').resourceSpans, 'resourceSpans')) {
    const { resource, scopeSpans } = object(resourceSpans, 'resourceSpans[]')
    const resourceAttributes = keyValues(object(resource, 'resource').attributes, 'the resource attributes')
    for (const scoped of list(scopeSpans, 'scopeSpans')) {
      const { scope, spans: scopeSpanList } = object(scoped, 'scopeSpans[]')
      const scopeName = string(object(scope, 'scope').name, 'the scope name')
      for (const item of list(scopeSpanList, 'spans')) {
        const span = object(item, 'a span')
        const name = string(span.name, 'a span name')
        const status = object(span.status, `the status of span "${name}"`)
        spans.push({
          traceId: id(span.traceId, 16, `the traceId of span "${name}"`),
          spanId: id(span.spanId, 8, `the spanId of span "${name}"`),
          parentSpanId: id(span.parentSpanId, 8, `the parentSpanId of span "${name}"`, true),
          name,
          kind: int32(span.kind, `the kind of span "${name}"`),
          attributes: keyValues(span.attributes, `the attributes of span "${name}"`),
          links: list(span.links, `the links of span "${name}"`).map((item) => {
            const link = object(item, `a link of span "${name}"`)
            return {
              traceId: id(link.traceId, 16, `a link's traceId in span "${name}"`),
              spanId: id(link.spanId, 8, `a link's spanId in span "${name}"`),
              attributes: keyValues(link.attributes, `a link's attributes in span "${name}"`),
            }
          }),
          status: { code: int32(status.code, `the status code of span "${name}"`), message: string(status.message, `the status message of span "${name}"`) },
          startTimeUnixNano: int64(span.startTimeUnixNano, `the start time of span "${name}"`),
          endTimeUnixNano: int64(span.endTimeUnixNano, `the end time of span "${name}"`),
          resource: resourceAttributes,
          scope: scopeName,
          encoding,
        })
      }
    }
  }
  return spans
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

/** A receiver on 127.0.0.1 at a free port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const requests: ReceivedRequest[] = []
  const waiters = new Set<{ check(): void; fail(error: Error): void }>()
  let closed: Promise<void> | undefined

  async function handle(req: IncomingMessage, res: ServerResponse, record: ReceivedRequest): Promise<void> {
    const body = await readBody(req)
    if (record.path !== '/v1/traces') throw new Refusal(404, `no such path: ${record.path}; traces go to POST /v1/traces`)
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST')
      throw new Refusal(405, `${req.method} /v1/traces: only POST is taken`)
    }
    const mediaType = record.contentType.split(';')[0]!.trim().toLowerCase()
    if (mediaType !== PROTOBUF && mediaType !== JSON_TYPE) throw new Refusal(415, `Content-Type "${record.contentType}": OTLP/HTTP takes ${PROTOBUF} or ${JSON_TYPE}`)
    const contentEncoding = (record.encoding ?? 'identity').trim().toLowerCase()
    if (contentEncoding !== 'gzip' && contentEncoding !== 'identity') throw new Refusal(415, `Content-Encoding "${record.encoding}": only gzip is taken`)
    const encoding = mediaType === PROTOBUF ? 'protobuf' : 'json'
    try {
      let payload = body
      if (contentEncoding === 'gzip') {
        try {
          payload = await gunzip(body)
        } catch (error) {
          badRequest(`the gzip body does not inflate: ${(error as Error).message}`)
        }
      }
      // Decoded whole before any span is kept: a refused request adds none.
      for (const span of spansOf(encoding === 'protobuf' ? decodeProtobuf(payload) : decodeJson(payload), encoding)) spans.push(span)
    } catch (error) {
      if (error instanceof Refusal) error.encoding = encoding
      throw error
    }
    // An empty ExportTraceServiceResponse: no partial_success, so every span was taken.
    record.status = 200
    if (encoding === 'protobuf') res.writeHead(200, { 'content-type': PROTOBUF, 'content-length': 0 }).end()
    else res.writeHead(200, { 'content-type': JSON_TYPE }).end('{}')
    for (const waiter of [...waiters]) waiter.check()
  }

  const server = createServer((req, res) => {
    const record: ReceivedRequest = {
      method: req.method ?? '',
      path: new URL(req.url ?? '/', 'http://receiver').pathname,
      contentType: req.headers['content-type'] ?? '',
      headers: req.headers,
      status: 0,
    }
    if (req.headers['content-encoding'] !== undefined) record.encoding = req.headers['content-encoding']
    requests.push(record)
    handle(req, res, record).catch((error: unknown) => {
      const refusal = error instanceof Refusal ? error : new Refusal(500, String(error))
      record.status = refusal.status
      const { encoding } = refusal
      if (res.headersSent) return void res.destroy()
      // A refused export's body is a google.rpc.Status in the request's encoding (OTLP/HTTP "Failures").
      if (encoding === 'protobuf') {
        const { status } = protoTypes()
        res.writeHead(refusal.status, { 'content-type': PROTOBUF }).end(status.encode({ code: INVALID_ARGUMENT, message: refusal.message }).finish())
      } else if (encoding === 'json') {
        res.writeHead(refusal.status, { 'content-type': JSON_TYPE }).end(JSON.stringify({ code: INVALID_ARGUMENT, message: refusal.message }))
      } else {
        res.writeHead(refusal.status, { 'content-type': 'text/plain; charset=utf-8' }).end(refusal.message)
      }
    })
  })
  protoTypes() // a broken vendored .proto fails here, not in the first export
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })

  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    requests,
    waitFor(predicate, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const waiter = {
          check() {
            let done: boolean
            try {
              done = predicate(spans)
            } catch (error) {
              return waiter.fail(error as Error)
            }
            if (done) {
              settle()
              resolve([...spans])
            }
          },
          fail(error: Error) {
            settle()
            reject(error)
          },
        }
        const timer = setTimeout(() => {
          const names = spans.length === 0 ? 'none' : spans.map((span) => `"${span.name}"`).join(', ')
          waiter.fail(new Error(`OTLP receiver: the spans did not match within ${timeoutMs} ms; ${requests.length} requests, spans seen: ${names}`))
        }, timeoutMs)
        const settle = () => {
          clearTimeout(timer)
          waiters.delete(waiter)
        }
        waiters.add(waiter)
        waiter.check()
      })
    },
    close() {
      if (closed === undefined) {
        for (const waiter of [...waiters]) waiter.fail(new Error('OTLP receiver: closed while waiting for spans'))
        closed = new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())))
        server.closeAllConnections() // exporters keep their connections alive
      }
      return closed
    },
  }
}
