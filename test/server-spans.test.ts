import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { after, before, beforeEach, describe, it } from 'node:test'
import { context, propagation, trace, TraceFlags, type Span } from '@opentelemetry/api'
import {
  InMemorySpanExporter,
  NodeTracerProvider,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-node'
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify'
import { activeTraceContext, type TraceContext } from '../src/trace-context.js'
import { traceRequests } from '../src/tracing/server-spans.js'

// The SERVER span of src/tracing/server-spans.ts under the sampler an operator who keeps none of
// the traces would set (OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0):
// only a caller's sampled traceparent gets a request recorded. One not sampled costs the decision
// and little else: a read runs outside any span, as with tracing off; a write runs in its span, not
// recorded, so that the events it records keep the trace context (the sampled flag off) that their
// deliveries pass on. Unit tests: a bare Fastify app, answered through inject, with the SDK
// registered in this process and its spans kept in memory.

const SERVER = 1 // the API's SpanKind

/** A W3C traceparent of a caller's span, with fresh ids, sampled or not. */
function caller(sampled: boolean): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-${sampled ? '01' : '00'}` }
}

/** What a handler sees of the span active in it (whether it is recording: an ended span is not). */
interface Seen {
  span: Span | undefined
  recording: boolean
  trace: TraceContext | undefined
}

describe('request spans under a sampler that keeps only what callers sampled', () => {
  const exporter = new InMemorySpanExporter()
  let provider: NodeTracerProvider
  let app: FastifyInstance
  let seen: Seen | undefined
  let arrived: ((reply: FastifyReply) => void) | undefined

  before(async () => {
    provider = new NodeTracerProvider({
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0) }),
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    })
    provider.register()
    app = Fastify()
    traceRequests(app)
    // After the span's hook: the request has its span once this runs.
    app.addHook('onRequest', (_request, reply, done) => {
      arrived?.(reply)
      done()
    })
    const look = (): { ok: true } => {
      const span = trace.getActiveSpan()
      seen = { span, recording: span?.isRecording() === true, trace: activeTraceContext() }
      return { ok: true }
    }
    app.get('/things/:thingId', async () => look())
    app.post('/things', async () => look())
    await app.ready()
  })
  after(async () => {
    await app.close()
    trace.disable()
    context.disable()
    propagation.disable()
    await provider.shutdown()
  })
  beforeEach(() => {
    exporter.reset()
    seen = undefined
  })

  async function call(method: 'GET' | 'POST', url: string, traceparent?: string): Promise<Seen> {
    const response = await app.inject({ method, url, headers: traceparent === undefined ? {} : { traceparent } })
    assert.equal(response.statusCode, 200, response.body)
    assert.ok(seen, 'the handler ran')
    return seen
  }

  it('a read not sampled is answered outside any span, and nothing of it is exported', async () => {
    const unsampled = caller(false)
    for (const traceparent of [undefined, unsampled.traceparent]) {
      const { span, trace: kept } = await call('GET', '/things/42', traceparent)
      assert.equal(span, undefined, `no span active (traceparent ${traceparent})`)
      assert.equal(kept, undefined, 'so nothing it did would keep a trace context')
    }
    await provider.forceFlush()
    assert.deepEqual(exporter.getFinishedSpans(), [])
  })

  it('a write not sampled runs in its span, not recorded: what it records keeps the trace, sampled flag off', async () => {
    const unsampled = caller(false)
    const { span, recording, trace: kept } = await call('POST', '/things', unsampled.traceparent)
    assert.ok(span, 'a span is active')
    assert.equal(recording, false)
    assert.equal(span.spanContext().traceId, unsampled.traceId, "the caller's trace")
    assert.equal(span.spanContext().traceFlags & TraceFlags.SAMPLED, 0)
    const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-00$/.exec(kept?.traceparent ?? '')
    assert.ok(match, `an unsampled traceparent to pass on, got ${kept?.traceparent}`)
    assert.equal(match[1], unsampled.traceId)
    assert.notEqual(match[2], unsampled.spanId, 'its parent is the request, not the caller')

    // Without a caller's traceparent, a trace of its own that the sampler declined.
    const root = await call('POST', '/things')
    assert.ok(root.span && trace.isSpanContextValid(root.span.spanContext()))
    assert.match(root.trace?.traceparent ?? '', /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
    await provider.forceFlush()
    assert.deepEqual(exporter.getFinishedSpans(), [])
  })

  it('a request its caller sampled is recorded, named for its route, and ended with its status', async () => {
    for (const id of ['1', '2']) {
      const sampled = caller(true)
      const { recording } = await call('GET', `/things/${id}`, sampled.traceparent)
      assert.equal(recording, true)
      await provider.forceFlush()
      const [exported, ...others] = exporter.getFinishedSpans()
      assert.equal(others.length, 0)
      assert.ok(exported)
      assert.equal(exported.name, 'GET /things/{thingId}')
      assert.equal(exported.kind, SERVER)
      assert.equal(exported.spanContext().traceId, sampled.traceId)
      assert.equal(exported.parentSpanContext?.spanId, sampled.spanId)
      assert.equal(exported.attributes['http.route'], '/things/{thingId}')
      assert.equal(exported.attributes['url.path'], `/things/${id}`)
      assert.equal(exported.attributes['http.response.status_code'], 200)
      exporter.reset()
    }
  })

  it('a request its caller sampled and then left before the answer is ended as aborted, with no status', async () => {
    const sampled = caller(true)
    const address = await app.listen({ host: '127.0.0.1', port: 0 })
    try {
      const { port } = new URL(address)
      // A body announced and never finished: the request is read when the client goes away.
      // In an object: a reply is thenable, and awaiting it would wait for its send.
      const started = new Promise<{ reply: FastifyReply }>((resolve) => (arrived = (reply) => resolve({ reply })))
      const socket = connect(Number(port), '127.0.0.1')
      socket.write(`POST /things HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\ntraceparent: ${sampled.traceparent}\r\n\r\n{"a":`)
      const { reply } = await started // the server has the request, and its span
      const closed = new Promise((resolve) => reply.raw.once('close', resolve))
      socket.destroy()
      await closed // after the span's own listener on the response, added before
      await provider.forceFlush()
      const [span, ...others] = exporter.getFinishedSpans()
      assert.equal(others.length, 0)
      assert.equal(span!.name, 'POST /things')
      assert.equal(span!.spanContext().traceId, sampled.traceId)
      assert.equal(span!.attributes['error.type'], 'aborted')
      assert.equal(span!.attributes['http.response.status_code'], undefined)
      assert.equal(seen, undefined, 'the handler never ran')
    } finally {
      arrived = undefined
    }
  })
})
