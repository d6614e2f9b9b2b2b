import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { gzipSync } from 'node:zlib'
import { context, SpanKind, SpanStatusCode, trace, TraceFlags, type Span } from '@opentelemetry/api'
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import { NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node'
import { exportTraceServiceRequestType, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver.js'

// The test-support OTLP/HTTP receiver against the real OpenTelemetry exporters, in both encodings,
// plain and gzipped: what the SDK made is what the receiver decodes. Each provider here is the
// test's own, never registered globally.

type ExporterConfig = NonNullable<ConstructorParameters<typeof ProtobufTraceExporter>[0]>

const LINKED = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED }
const BEYOND_2_53 = 9_007_199_254_740_993n

const nowNanos = () => BigInt(Date.now()) * 1_000_000n

/** A parent (server) span and its child (client) span, with attributes, a link and a status, sent through `exporter`. */
async function exportTwoSpans(exporter: ProtobufTraceExporter | JsonTraceExporter, serviceName: string) {
  const provider = new NodeTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': serviceName })),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  })
  try {
    const tracer = provider.getTracer('otlp-receiver-test', '1.2.3')
    const parent: Span = tracer.startSpan('GET /v2/store/orders', {
      kind: SpanKind.SERVER,
      attributes: { 'http.request.method': 'GET', 'http.response.status_code': 200, 'test.cached': false, 'test.ratio': 0.25, 'test.tags': ['a', 'b'] },
    })
    const child: Span = tracer.startSpan(
      'SELECT orders',
      {
        kind: SpanKind.CLIENT,
        attributes: { 'db.system.name': 'sqlite', 'db.response.returned_rows': 3, 'test.retried': true, 'test.negative': -7 },
        links: [{ context: LINKED, attributes: { 'link.reason': 'batch' } }],
      },
      trace.setSpan(context.active(), parent),
    )
    child.setStatus({ code: SpanStatusCode.ERROR, message: 'no such table' })
    child.end()
    parent.end()
    await provider.forceFlush()
    return { parent: parent.spanContext(), child: child.spanContext() }
  } finally {
    await provider.shutdown()
  }
}

describe('OTLP receiver (test support)', () => {
  let receiver: OtlpReceiver

  before(async () => {
    receiver = await startOtlpReceiver()
  })
  after(() => receiver.close())

  const cases = [
    { encoding: 'protobuf', gzip: false },
    { encoding: 'protobuf', gzip: true },
    { encoding: 'json', gzip: false },
    { encoding: 'json', gzip: true },
  ] as const

  for (const { encoding, gzip } of cases) {
    const exporterName = encoding === 'protobuf' ? '@opentelemetry/exporter-trace-otlp-proto' : '@opentelemetry/exporter-trace-otlp-http'
    it(`decodes what ${exporterName} sends${gzip ? ', gzipped' : ''}: names, ids, kinds, attributes, link, status, resource, scope`, async () => {
      const serviceName = `otlp-receiver-test-${encoding}${gzip ? '-gzip' : ''}`
      const config: ExporterConfig = { url: `${receiver.url}/v1/traces`, compression: (gzip ? 'gzip' : 'none') as ExporterConfig['compression'] }
      const exporter = encoding === 'protobuf' ? new ProtobufTraceExporter(config) : new JsonTraceExporter(config)
      const requestsBefore = receiver.requests.length
      const startedAfter = nowNanos()
      const sent = await exportTwoSpans(exporter, serviceName)
      const ours = (spans: readonly ReceivedSpan[]) => spans.filter((span) => span.resource['service.name'] === serviceName)
      const spans = ours(await receiver.waitFor((spans) => ours(spans).length >= 2, 10_000))

      // A simple span processor exports each span as it ends, in a request of its own: they may arrive in either order.
      assert.deepEqual(spans.map((span) => span.name).sort(), ['GET /v2/store/orders', 'SELECT orders'])
      const parent = spans.find((span) => span.name === 'GET /v2/store/orders')!
      const child = spans.find((span) => span.name === 'SELECT orders')!
      assert.equal(parent.traceId, sent.parent.traceId)
      assert.match(parent.traceId, /^[0-9a-f]{32}$/)
      assert.equal(parent.spanId, sent.parent.spanId)
      assert.match(parent.spanId, /^[0-9a-f]{16}$/)
      assert.equal(parent.parentSpanId, '', 'the parent is a root span')
      assert.equal(child.traceId, parent.traceId)
      assert.equal(child.spanId, sent.child.spanId)
      assert.equal(child.parentSpanId, parent.spanId)

      assert.equal(parent.kind, 2, 'SPAN_KIND_SERVER')
      assert.equal(child.kind, 3, 'SPAN_KIND_CLIENT')
      assert.deepEqual(parent.attributes, { 'http.request.method': 'GET', 'http.response.status_code': 200, 'test.cached': false, 'test.ratio': 0.25, 'test.tags': ['a', 'b'] })
      assert.deepEqual(child.attributes, { 'db.system.name': 'sqlite', 'db.response.returned_rows': 3, 'test.retried': true, 'test.negative': -7 })
      assert.deepEqual(child.links, [{ traceId: LINKED.traceId, spanId: LINKED.spanId, attributes: { 'link.reason': 'batch' } }])
      assert.deepEqual(parent.links, [])
      assert.deepEqual(child.status, { code: 2, message: 'no such table' }, 'STATUS_CODE_ERROR')
      assert.deepEqual(parent.status, { code: 0, message: '' }, 'STATUS_CODE_UNSET')

      for (const span of spans) {
        assert.equal(typeof span.startTimeUnixNano, 'bigint')
        assert.ok(span.startTimeUnixNano >= startedAfter - 1_000_000_000n && span.startTimeUnixNano <= nowNanos() + 1_000_000_000n, `a start time of now: ${span.startTimeUnixNano}`)
        assert.ok(span.endTimeUnixNano >= span.startTimeUnixNano)
        assert.equal(span.resource['service.name'], serviceName)
        assert.equal(span.resource['telemetry.sdk.language'], 'nodejs')
        assert.equal(span.scope, 'otlp-receiver-test')
        assert.equal(span.encoding, encoding)
      }

      const requests = receiver.requests.slice(requestsBefore)
      assert.ok(requests.length >= 1)
      for (const request of requests) {
        assert.equal(request.path, '/v1/traces')
        assert.equal(request.contentType, encoding === 'protobuf' ? 'application/x-protobuf' : 'application/json')
        assert.equal(request.encoding, gzip ? 'gzip' : undefined)
        assert.equal(request.status, 200)
      }
    })
  }

  it('keeps an int64 exact in both encodings: a number when it is safe, a bigint beyond 2^53', async () => {
    const traceId = 'ab'.repeat(16)
    const type = exportTraceServiceRequestType()
    const protobufBody = type
      .encode(
        type.fromObject({
          resourceSpans: [
            {
              scopeSpans: [
                {
                  spans: [
                    {
                      traceId: Buffer.from(traceId, 'hex'),
                      spanId: Buffer.from('01'.repeat(8), 'hex'),
                      name: 'int64 in protobuf',
                      startTimeUnixNano: 1_700_000_000_000_000_001n,
                      endTimeUnixNano: 1_700_000_000_000_000_002n,
                      attributes: [
                        { key: 'big', value: { intValue: BEYOND_2_53 } },
                        { key: 'small', value: { intValue: -42n } },
                        { key: 'empty', value: { stringValue: '' } },
                      ],
                    },
                  ],
                },
              ],
            },
          ],
        }),
      )
      .finish()
    const json = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"${traceId.toUpperCase()}","spanId":"0202020202020202","parentSpanId":"",
      "name":"int64 in JSON","kind":1,"startTimeUnixNano":"1700000000000000001","endTimeUnixNano":1700000000000000002,
      "attributes":[{"key":"big","value":{"intValue":"${BEYOND_2_53}"}},{"key":"bigNumber","value":{"intValue":${BEYOND_2_53}}},
        {"key":"small","value":{"intValue":"-42"}},{"key":"empty","value":{"stringValue":""}}]}]}]}]}`

    const answers = [
      await fetch(`${receiver.url}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: protobufBody }),
      await fetch(`${receiver.url}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8', 'content-encoding': 'gzip' }, body: gzipSync(json) }),
    ]
    assert.deepEqual(
      answers.map((answer) => [answer.status, answer.headers.get('content-type')]),
      [
        [200, 'application/x-protobuf'],
        [200, 'application/json'],
      ],
    )
    assert.equal((await answers[0]!.arrayBuffer()).byteLength, 0, 'an empty ExportTraceServiceResponse')
    assert.equal(await answers[1]!.text(), '{}')

    const spans = (await receiver.waitFor((spans) => spans.filter((span) => span.traceId === traceId).length === 2, 10_000)).filter((span) => span.traceId === traceId)
    const [fromProtobuf, fromJson] = spans as [ReceivedSpan, ReceivedSpan]
    assert.deepEqual(fromProtobuf.attributes, { big: BEYOND_2_53, small: -42, empty: '' })
    assert.deepEqual(fromJson.attributes, { big: BEYOND_2_53, bigNumber: BEYOND_2_53, small: -42, empty: '' })
    for (const span of spans) {
      assert.equal(span.startTimeUnixNano, 1_700_000_000_000_000_001n)
      assert.equal(span.endTimeUnixNano, 1_700_000_000_000_000_002n)
      assert.equal(span.parentSpanId, '')
      assert.deepEqual(span.resource, {})
      assert.equal(span.scope, '')
    }
    assert.equal(fromProtobuf.kind, 0, 'SPAN_KIND_UNSPECIFIED when not sent')
    assert.equal(fromJson.kind, 1)
  })

  it('refuses a body in another media type (415), garbage in protobuf or JSON (400), and other paths (404), and keeps no span from them', async () => {
    const spansBefore = receiver.spans.length
    const post = (headers: Record<string, string>, body: string | Uint8Array, path = '/v1/traces') => fetch(`${receiver.url}${path}`, { method: 'POST', headers, body })

    const textPlain = await post({ 'content-type': 'text/plain' }, 'hello')
    assert.equal(textPlain.status, 415)
    assert.match(await textPlain.text(), /application\/x-protobuf or application\/json/)
    assert.equal((await post({ 'content-type': 'application/x-protobuf', 'content-encoding': 'br' }, 'x')).status, 415, 'a content coding other than gzip')

    const garbage = await post({ 'content-type': 'application/x-protobuf' }, Buffer.from('not a protobuf message'))
    assert.equal(garbage.status, 400)
    assert.equal(garbage.headers.get('content-type'), 'application/x-protobuf', 'the failure is a google.rpc.Status in the request\'s encoding')
    assert.ok((await garbage.arrayBuffer()).byteLength > 0)
    assert.equal((await post({ 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' }, 'not gzip')).status, 400)
    const badJson = await post({ 'content-type': 'application/json' }, '{"resourceSpans":')
    assert.equal(badJson.status, 400)
    assert.equal(((await badJson.json()) as { code: number }).code, 3, 'INVALID_ARGUMENT')
    const badId = '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"not hex","spanId":"0101010101010101","name":"bad id"}]}]}]}'
    assert.equal((await post({ 'content-type': 'application/json' }, badId)).status, 400)

    assert.equal((await post({ 'content-type': 'application/json' }, '{}', '/v1/metrics')).status, 404)
    assert.equal((await fetch(`${receiver.url}/v1/traces`)).status, 405)
    assert.equal(receiver.spans.length, spansBefore)
    assert.deepEqual(
      receiver.requests.slice(-8).map((request) => request.status),
      [415, 415, 400, 400, 400, 400, 404, 405],
    )
  })

  it('waitFor resolves at once when the spans are already there, and otherwise rejects at its timeout naming the spans seen', async () => {
    assert.ok(receiver.spans.length > 0)
    assert.deepEqual(await receiver.waitFor((spans) => spans.length > 0, 1), receiver.spans)
    await assert.rejects(receiver.waitFor((spans) => spans.some((span) => span.name === 'never sent'), 50), (error: Error) => {
      assert.match(error.message, /did not match within 50 ms/)
      assert.match(error.message, /"SELECT orders"/)
      return true
    })
  })

  it('waitFor re-checks as each request arrives: a span sent after the call resolves it', async () => {
    const waiting = receiver.waitFor((spans) => spans.some((span) => span.name === 'late'), 10_000)
    const late = '{"resourceSpans":[{"scopeSpans":[{"scope":{"name":"by hand"},"spans":[{"traceId":"0303030303030303030303030303030c","spanId":"0303030303030303","name":"late","kind":2}]}]}]}'
    const answer = await fetch(`${receiver.url}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: late })
    assert.equal(answer.status, 200)
    const spans = await waiting
    assert.equal(spans.at(-1)!.name, 'late')
    assert.equal(spans.at(-1)!.scope, 'by hand')
  })

  it('close() rejects a waitFor still pending, and may be called twice', async () => {
    const other = await startOtlpReceiver()
    const waiting = other.waitFor(() => false, 10_000)
    await other.close()
    await assert.rejects(waiting, /closed while waiting for spans/)
    await other.close()
  })
})
