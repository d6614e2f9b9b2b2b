import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { generateApiKey } from '../src/domain/api-keys.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, forEachStore, within, type StoreKind, type TestDatabaseHandle } from './support/harness.js'
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'
import { receiver, type Delivery, type Receiver } from './support/webhook-receiver.js'

// OpenTelemetry traces from the outside: a real `serve` process on each store, exporting over OTLP
// (both protocols) to a receiver in this process, called with W3C traceparents of our own and
// delivering webhooks to a real receiver. What a span holds, which trace it is in, and that a
// webhook delivery continues the trace of the request that caused its event.

const SERVER = 2 // OTLP SpanKind
const CLIENT = 3
const ERROR = 2 // OTLP StatusCode

/** A W3C traceparent of a sampled caller's span, with fresh ids. */
function callerContext(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` }
}

/** traceparent's parts, checked for form. */
function parseTraceparent(header: string | undefined): { traceId: string; spanId: string; flags: string } {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(header ?? '')
  assert.ok(match, `a W3C traceparent, got ${header}`)
  return { traceId: match[1]!, spanId: match[2]!, flags: match[3]! }
}

const inTrace = (spans: ReceivedSpan[], traceId: string): ReceivedSpan[] => spans.filter((span) => span.traceId === traceId)

/** Whether `span` descends from the span `ancestorId` within `spans`. */
function descends(spans: ReceivedSpan[], span: ReceivedSpan, ancestorId: string): boolean {
  for (let at: ReceivedSpan | undefined = span; at !== undefined; at = spans.find((other) => other.spanId === at!.parentSpanId)) {
    if (at.parentSpanId === ancestorId) return true
  }
  return false
}

/** Every attribute value of `span` as text, to look for what must never be there. */
const attributeText = (span: ReceivedSpan): string => JSON.stringify(span.attributes, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))

forEachStore('traces', (kind: StoreKind) => {
  for (const protocol of ['http/protobuf', 'http/json'] as const) {
    describe(`over OTLP ${protocol}`, () => {
      let database: TestDatabaseHandle
      let store: Store
      let otlp: OtlpReceiver
      let hooks: Receiver
      let server: ServerProcess
      let key: string
      let secret: string
      let endpointId: string

      before(async () => {
        database = await createDatabase(kind)
        store = await openStore(database.config)
        await store.migrate()
        const generated = generateApiKey()
        await store.apiKeys.create({
          name: 'traces',
          hash: generated.hash,
          displayPrefix: generated.displayPrefix,
          scopes: ['orders:read', 'orders:write', 'webhooks:manage'],
          expiresAt: null,
        })
        key = generated.secret
        otlp = await startOtlpReceiver()
        hooks = await receiver()
        server = await spawnServer(database.url, {
          LOG_LEVEL: 'info',
          WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
          WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms',
          OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
          OTEL_SERVICE_NAME: 'orders-under-test',
          OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
          OTEL_BSP_SCHEDULE_DELAY: '50',
        })
        const created = await api('POST', '/v2/webhook-endpoints', { url: hooks.url, eventTypes: ['order.created'] })
        assert.equal(created.status, 201, created.text)
        ;({ secret } = JSON.parse(created.text) as { secret: string })
        endpointId = /"id":(\d+)/.exec(created.text)![1]!
      })
      after(async () => {
        server.child.kill('SIGTERM')
        await server.exited
        await hooks.close()
        await otlp.close()
        await store.close()
        await database.dispose()
      })

      async function api(method: string, path: string, body?: object, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
        const response = await fetch(`${server.origin}${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
          body: body === undefined ? undefined : JSON.stringify(body),
        })
        return { status: response.status, text: await response.text() }
      }

      async function place(headers: Record<string, string>): Promise<string> {
        const placed = await api('POST', '/v2/store/orders', { petId: 1, quantity: 1 }, headers)
        assert.equal(placed.status, 201, placed.text)
        return /"id":(\d+)/.exec(placed.text)![1]!
      }

      /** The deliveries of order `orderId`'s order.created event so far, once there are `count`; fails after 30 s (the OTLP receiver's wait, too). */
      async function deliveriesOf(orderId: string, count = 1): Promise<Delivery[]> {
        const found = (): Delivery[] => hooks.deliveries.filter((candidate) => candidate.body.includes(`"order":{"id":${orderId},`))
        await within(30_000, `${count} deliveries of order ${orderId}`, () => found().length >= count, 10)
        return found()
      }

      /** The server's "request" log line that holds `text`, once written (lines are flushed every 250 ms). */
      async function requestLine(text: string, what: string): Promise<string> {
        const line = (): string | undefined =>
          server
            .output()
            .split('\n')
            .find((candidate) => candidate.includes(text) && candidate.includes('"msg":"request"'))
        await within(20_000, what, () => line() !== undefined)
        return line()!
      }

      it('a request: a SERVER span named for its route, with the HTTP attributes, continuing the caller\'s traceparent', async () => {
        const caller = callerContext()
        const id = await place({})
        const read = await api('GET', `/v2/store/orders/${id}?fields=ignored`, undefined, { traceparent: caller.traceparent })
        assert.ok(read.status === 200 || read.status === 400, read.text)
        const spans = await otlp.waitFor((all) => all.some((span) => span.traceId === caller.traceId && span.kind === SERVER))
        const request = inTrace(spans, caller.traceId).find((span) => span.kind === SERVER)!
        assert.equal(request.name, 'GET /v2/store/orders/{orderId}')
        assert.equal(request.parentSpanId, caller.spanId, 'a child of the caller\'s span')
        assert.equal(request.attributes['http.request.method'], 'GET')
        assert.equal(request.attributes['http.route'], '/v2/store/orders/{orderId}')
        assert.equal(request.attributes['url.path'], `/v2/store/orders/${id}`, 'the path, without the query')
        assert.equal(request.attributes['http.response.status_code'], read.status)
        assert.equal(request.status.code, 0, 'a 2xx or 4xx leaves the status unset')
        assert.equal(request.resource['service.name'], 'orders-under-test', 'OTEL_SERVICE_NAME')
        assert.equal(request.resource['deployment.environment.name'], 'test', 'OTEL_RESOURCE_ATTRIBUTES')
        assert.equal(request.encoding, protocol === 'http/json' ? 'json' : 'protobuf')
      })

      it(`its database work: ${kind === 'postgres' ? 'instrumentation-pg' : 'a span per store operation'} under the request, with no value in any attribute`, async () => {
        const caller = callerContext()
        const id = await place({})
        assert.equal((await api('GET', `/v2/store/orders/${id}`, undefined, { traceparent: caller.traceparent })).status, 200)
        const isDatabase = (span: ReceivedSpan): boolean =>
          kind === 'postgres' ? span.scope === '@opentelemetry/instrumentation-pg' : span.attributes['db.system'] === 'sqlite'
        const spans = await otlp.waitFor((all) => {
          const trace = inTrace(all, caller.traceId)
          const request = trace.find((span) => span.kind === SERVER)
          return request !== undefined && trace.some((span) => isDatabase(span) && descends(all, span, request.spanId))
        })
        const trace = inTrace(spans, caller.traceId)
        const request = trace.find((span) => span.kind === SERVER)!
        const database = trace.filter(isDatabase)
        assert.ok(database.length > 0)
        for (const span of database) {
          assert.ok(descends(spans, span, request.spanId), `${span.name} is under the request`)
          assert.doesNotMatch(attributeText(span), new RegExp(`\\b${id}\\b`), `${span.name} holds no parameter value`)
          assert.doesNotMatch(attributeText(span), /pso_/, 'nor a key')
        }
        if (kind === 'sqlite') {
          const find = database.find((span) => span.name === 'orders.find')
          assert.ok(find, `an orders.find span among ${database.map((span) => span.name).join(', ')}`)
          assert.equal(find.attributes['db.operation.name'], 'orders.find')
          assert.equal(find.kind, CLIENT)
        } else {
          assert.ok(database.some((span) => span.attributes['db.system.name'] === 'postgresql'))
        }
      })

      it('a v1 list: its SERVER span, and none for the data version it checks before it reads', async () => {
        const caller = callerContext()
        const list = await api('GET', '/v1/store/orders', undefined, { traceparent: caller.traceparent })
        assert.equal(list.status, 200, list.text)
        // A store span ends before its request's, so it is exported with it or before it.
        const spans = await otlp.waitFor((all) => inTrace(all, caller.traceId).some((span) => span.kind === SERVER))
        const names = inTrace(spans, caller.traceId).map((span) => span.name)
        assert.ok(names.includes('GET /v1/store/orders'), names.join(', '))
        assert.ok(!names.includes('orders.dataVersion'), names.join(', '))
      })

      it('a place committed in a batch shows the group commit in its trace', async () => {
        const callers = Array.from({ length: 8 }, callerContext)
        await Promise.all(callers.map((caller) => place({ traceparent: caller.traceparent })))
        const commits = (all: ReceivedSpan[]): ReceivedSpan[] => all.filter((span) => span.name === 'group commit')
        // Each request's trace holds its commit, or links to the one it shared.
        const shown = (all: ReceivedSpan[], traceId: string): boolean =>
          commits(all).some((commit) => commit.traceId === traceId) ||
          inTrace(all, traceId).some((span) => span.links.some((link) => commits(all).some((commit) => commit.spanId === link.spanId)))
        const spans = await otlp.waitFor((all) => callers.every((caller) => shown(all, caller.traceId)))
        for (const commit of commits(spans).filter((span) => callers.some((caller) => caller.traceId === span.traceId))) {
          const size = commit.attributes['db.operation.batch.size']
          assert.equal(typeof size, 'number')
          assert.equal(commit.links.length <= (size as number) - 1, true, 'a link to each other request of its batch')
        }
      })

      it('a delivery sends a traceparent in the trace of the request that placed the order, from a CLIENT span per attempt', async () => {
        const caller = callerContext()
        const id = await place({ traceparent: caller.traceparent, tracestate: 'caller=1' })
        const delivery = (await deliveriesOf(id))[0]!
        const sent = parseTraceparent(delivery.headers.traceparent)
        assert.equal(sent.traceId, caller.traceId, 'the receiver joins the trace of the place')
        assert.equal(delivery.headers.tracestate, 'caller=1', 'the caller\'s tracestate travels with it')
        // The signature is what it always was: the trace headers are not signed.
        new Webhook(secret).verify(delivery.body, delivery.headers)
        const spans = await otlp.waitFor((all) => all.some((span) => span.spanId === sent.spanId) && inTrace(all, caller.traceId).some((span) => span.kind === SERVER))
        const attempt = spans.find((span) => span.spanId === sent.spanId)!
        assert.equal(attempt.name, 'webhook delivery')
        assert.equal(attempt.kind, CLIENT)
        assert.equal(attempt.attributes['webhook.endpoint.id'], endpointId)
        assert.equal(attempt.attributes['webhook.event.id'], delivery.id)
        assert.equal(attempt.attributes['http.response.status_code'], 200)
        assert.equal(attempt.attributes['server.address'], '127.0.0.1')
        assert.ok(attempt.endTimeUnixNano > attempt.startTimeUnixNano, 'its duration')
        assert.doesNotMatch(attributeText(attempt), /whsec_|\/hook|"order"/, 'no secret, URL path or body')
        // It hangs off the place: the request's span, or what the request did.
        const request = inTrace(spans, caller.traceId).find((span) => span.kind === SERVER)
        assert.ok(request, 'the place\'s own span is in the trace')
        assert.ok(descends(spans, attempt, request.spanId), 'the attempt descends from the place\'s span')
        // The log line of the place names its trace and span.
        const line = await requestLine(`"trace_id":"${caller.traceId}"`, 'the request\'s log line, carrying its trace_id')
        assert.match(line, new RegExp(`"span_id":"${request.spanId}"`))
      })

      it('a caller that did not sample: its request exports nothing, and its log line names no trace', async () => {
        const caller = callerContext()
        const requestId = `unsampled-${caller.traceId}`
        const headers = { traceparent: caller.traceparent.replace(/-01$/, '-00'), 'x-request-id': requestId }
        const id = await place({})
        assert.equal((await api('GET', `/v2/store/orders/${id}`, undefined, headers)).status, 200)
        // A sampled request after it: its span is exported in the same batch or a later one.
        const marker = callerContext()
        assert.equal((await api('GET', `/v2/store/orders/${id}`, undefined, { traceparent: marker.traceparent })).status, 200)
        const spans = await otlp.waitFor((all) => inTrace(all, marker.traceId).some((span) => span.kind === SERVER))
        assert.deepEqual(inTrace(spans, caller.traceId), [], 'the caller decided not to sample: nothing of its trace is exported')
        const line = await requestLine(`"reqId":"${requestId}"`, 'the unsampled request\'s log line')
        assert.doesNotMatch(line, /"trace_id"|"span_id"/)
      })

      it("a caller that did not sample, placing an order: nothing is exported, and the delivery passes the caller's trace on, not sampled", async () => {
        const caller = callerContext()
        const id = await place({ traceparent: caller.traceparent.replace(/-01$/, '-00') })
        const delivery = (await deliveriesOf(id))[0]!
        const sent = parseTraceparent(delivery.headers.traceparent)
        assert.equal(sent.traceId, caller.traceId, "the caller's trace, not one of the delivery's own")
        assert.equal(sent.flags, '00', 'not sampled: a receiver that follows its parent records nothing either')
        // A sampled request after the delivery: its span is exported in the same batch or a later one.
        const marker = callerContext()
        assert.equal((await api('GET', `/v2/store/orders/${id}`, undefined, { traceparent: marker.traceparent })).status, 200)
        const spans = await otlp.waitFor((all) => inTrace(all, marker.traceId).some((span) => span.kind === SERVER))
        assert.deepEqual(inTrace(spans, caller.traceId), [], 'neither the place nor its delivery is exported')
      })

      it('a ping joins the trace of the request that sent it', async () => {
        const caller = callerContext()
        const before = hooks.deliveries.length
        const pinged = await api('POST', `/v2/webhook-endpoints/${endpointId}/ping`, undefined, { traceparent: caller.traceparent })
        assert.equal(pinged.status, 200, pinged.text)
        const ping = hooks.deliveries.slice(before).find((delivery) => delivery.id.startsWith('ping_'))
        assert.ok(ping, 'the ping arrived')
        const sent = parseTraceparent(ping.headers.traceparent)
        assert.equal(sent.traceId, caller.traceId)
        // The request's span ends after the ping's: it may come in a later export.
        const spans = await otlp.waitFor((all) => all.some((span) => span.spanId === sent.spanId) && inTrace(all, caller.traceId).some((span) => span.kind === SERVER))
        const attempt = spans.find((span) => span.spanId === sent.spanId)!
        assert.equal(attempt.name, 'webhook ping')
        assert.equal(attempt.attributes['webhook.event.id'], ping.id)
        const request = inTrace(spans, caller.traceId).find((span) => span.kind === SERVER)
        assert.equal(request?.name, 'POST /v2/webhook-endpoints/{endpointId}/ping')
        assert.ok(descends(spans, attempt, request.spanId))
      })

      it("a ping passes on the trace context alone: traceparent, a tracestate within W3C's limits, never the caller's baggage", async () => {
        const caller = callerContext()
        // 40 members of 24 characters: past both limits (32 members, 512 characters).
        const members = Array.from({ length: 40 }, (_, i) => `v${String(i).padStart(2, '0')}=${'x'.repeat(20)}`)
        const before = hooks.deliveries.length
        const pinged = await api('POST', `/v2/webhook-endpoints/${endpointId}/ping`, undefined, {
          traceparent: caller.traceparent,
          tracestate: members.join(','),
          baggage: 'user.id=baggage-secret-42,tenant=acme',
        })
        assert.equal(pinged.status, 200, pinged.text)
        const ping = hooks.deliveries.slice(before).find((delivery) => delivery.id.startsWith('ping_'))
        assert.ok(ping, 'the ping arrived')
        assert.equal(parseTraceparent(ping.headers.traceparent).traceId, caller.traceId)
        const tracestate = ping.headers.tracestate ?? ''
        assert.ok(tracestate.length > 0 && tracestate.length <= 512, `tracestate of ${tracestate.length} characters`)
        const kept = tracestate.split(',')
        assert.ok(kept.length <= 32, `${kept.length} members`)
        assert.deepEqual(kept, members.slice(0, kept.length), 'the first members, in order: what is over is dropped from the end')
        assert.equal(ping.headers.baggage, undefined, 'no baggage header')
        assert.doesNotMatch(JSON.stringify(ping.headers), /baggage-secret-42|tenant/)
        assert.deepEqual(Object.keys(ping.headers).sort(), [
          'connection',
          'content-length',
          'content-type',
          'host',
          'traceparent',
          'tracestate',
          'user-agent',
          'webhook-id',
          'webhook-signature',
          'webhook-timestamp',
        ])
      })

      it('a retry is another attempt in the same trace; an event written outside a request starts a trace of its own', async () => {
        let calls = 0
        hooks.answer = (_delivery, _req, res) => {
          res.statusCode = ++calls === 1 ? 500 : 200
          res.end()
        }
        try {
          const caller = callerContext()
          const id = await place({ traceparent: caller.traceparent })
          const [first, second] = await deliveriesOf(id, 2)
          const one = parseTraceparent(first!.headers.traceparent)
          const two = parseTraceparent(second!.headers.traceparent)
          assert.equal(one.traceId, caller.traceId)
          assert.equal(two.traceId, caller.traceId, 'the retry carries the trace too')
          assert.notEqual(one.spanId, two.spanId, 'a span per attempt')
          const spans = await otlp.waitFor((all) => all.some((span) => span.spanId === one.spanId) && all.some((span) => span.spanId === two.spanId))
          const failed = spans.find((span) => span.spanId === one.spanId)!
          assert.equal(failed.status.code, ERROR)
          assert.equal(failed.attributes['error.type'], 'status 500')
          assert.equal(failed.attributes['http.response.status_code'], 500)
          // The dispatcher's line about the failure is in the failed attempt's trace.
          await within(20_000, 'the "webhook endpoint failing" line', () => server.output().includes('"msg":"webhook endpoint failing"'))
          const failing = server.output().split('\n').find((text) => text.includes('"msg":"webhook endpoint failing"'))!
          assert.match(failing, new RegExp(`"trace_id":"${caller.traceId}","span_id":"${one.spanId}"`))

          // A replay sends the event again, in the same trace.
          const eventId = first!.id
          const before = hooks.deliveries.length
          const replayed = await api('POST', `/v2/webhook-endpoints/${endpointId}/replay`, { after: (BigInt(eventId) - 1n).toString() })
          assert.equal(replayed.status, 202, replayed.text)
          await within(20_000, 'the replayed delivery', () => hooks.deliveries.slice(before).some((delivery) => delivery.id === eventId))
          const again = hooks.deliveries.slice(before).find((delivery) => delivery.id === eventId)!
          assert.equal(parseTraceparent(again.headers.traceparent).traceId, caller.traceId, 'a replay carries the trace too')
        } finally {
          hooks.answer = (_delivery, _req, res) => res.end()
        }

        // Written by this process, as the CLI and an import write: no request, no trace of its own.
        const placed = await store.orders.place({ order: { petId: 1n, quantity: 1, shipDate: null } })
        assert.equal(placed.outcome, 'placed')
        const delivery = (await deliveriesOf((placed as { order: { id: bigint } }).order.id.toString()))[0]!
        const sent = parseTraceparent(delivery.headers.traceparent)
        const spans = await otlp.waitFor((all) => all.some((span) => span.spanId === sent.spanId))
        const attempt = spans.find((span) => span.spanId === sent.spanId)!
        assert.equal(attempt.parentSpanId, '', 'the delivery is the root of a trace of its own')
        assert.equal(inTrace(spans, sent.traceId).filter((span) => span.kind === SERVER).length, 0)
      })
    })
  }
})
