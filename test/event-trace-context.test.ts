import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { context, createTraceState, propagation, ROOT_CONTEXT, trace, TraceFlags, type Context } from '@opentelemetry/api'
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node'
import pg from 'pg'
import type { NewOrder, OrderRecord } from '../src/domain/orders.js'
import { ORDER_EVENT_TYPES } from '../src/domain/order-events.js'
import type { DeliveryEvent, WebhookEndpoint } from '../src/domain/webhooks.js'
import { openStore } from '../src/store/open-store.js'
import { traceContextArrays } from '../src/store/postgres/write-sql.js'
import type { Store } from '../src/store/store.js'
import { activeTraceContext, type TraceContext } from '../src/trace-context.js'
import { deliveryBody } from '../src/webhooks/signing.js'
import { createDatabase, forEachStore, type StoreKind, type TestDatabaseHandle } from './support/harness.js'

// Each order event keeps the W3C trace context of the write that recorded it (a place, a cancel, a
// ship, a complete, an update), on both stores: the
// one active when the write was submitted (its group commit runs outside it), each write of a batch
// its own, none for a write made with no span or with tracing off, nor for an import. The webhooks'
// next() gives it back; the feed's pages and the delivery bodies do not change by a byte.

const NEW_ORDER: NewOrder = { petId: 7n, quantity: 2, shipDate: '2026-12-01T09:30:00.000Z' }
const HOUR = 3_600_000

function order(id: bigint, fields: Partial<OrderRecord> = {}): OrderRecord {
  return { id, petId: 7n, quantity: 1, shipDate: null, complete: false, status: 'pending', ...fields }
}

async function* from<T>(items: Iterable<T>): AsyncIterable<T> {
  yield* items
}

/**
 * Tracing as a service would run it: the SDK's registration sets the global tracer provider, the
 * AsyncLocalStorage context manager and the W3C trace-context propagator (with baggage's). Returns
 * what turns it off again. (@opentelemetry/core, where the propagator lives, is not a package of
 * this project's own: the SDK, which is, brings it.)
 */
function tracingOn(): () => Promise<void> {
  const provider = new NodeTracerProvider()
  provider.register()
  return async () => {
    trace.disable()
    context.disable()
    propagation.disable()
    await provider.shutdown()
  }
}

interface TestSpan {
  /** A context where the span is active. */
  context: Context
  /** What an event of a write made in it keeps. */
  expected: TraceContext
}

/** A span of a trace of its own (random ids), sampled, with a tracestate unless told `null`. */
function span(traceState: string | null = 'vendor=value'): TestSpan {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  const spanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED, ...(traceState === null ? {} : { traceState: createTraceState(traceState) }) }
  const traceparent = `00-${traceId}-${spanId}-01`
  return {
    context: trace.setSpan(ROOT_CONTEXT, trace.wrapSpanContext(spanContext)),
    expected: traceState === null ? { traceparent } : { traceparent, tracestate: traceState },
  }
}

/** `write` called with `span` active, as a traced request calls the store. */
function within<T>(span: TestSpan, write: () => T): T {
  return context.with(span.context, write)
}

/** An event's key: its type and its order's id (each order gets one write of each type here). */
function keyOf(event: DeliveryEvent): string {
  const { order } = JSON.parse(event.json) as { order: { id: number } }
  return `${event.type} ${order.id}`
}

/** A fresh migrated database and a store on it, with an endpoint of every type at position 0. */
async function withStore(kind: StoreKind, work: (store: Store, endpoint: WebhookEndpoint, database: TestDatabaseHandle) => Promise<void>): Promise<void> {
  const database = await createDatabase(kind)
  const store = await openStore(database.config)
  try {
    await store.migrate()
    const endpoint = await store.webhooks.create(
      { url: 'https://hooks.example/petstore', eventTypes: [...ORDER_EVENT_TYPES], description: null, secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}` },
      10,
    )
    assert.notEqual(endpoint, 'too_many')
    await work(store, endpoint as WebhookEndpoint, database)
  } finally {
    await store.close()
    await database.dispose()
  }
}

/** Every event after the endpoint's position, as a dispatcher leasing it reads them. */
async function nextEvents(store: Store): Promise<DeliveryEvent[]> {
  const leases = await store.webhooks.lease('test', new Date(), 30_000, 10)
  assert.equal(leases.length, 1)
  const next = await store.webhooks.next(leases[0]!, 1000)
  if (next === 'expired') return assert.fail('no event was pruned')
  return next.events
}

/** The trace each event has (null: none, and no `trace` field at all), by keyOf. */
function tracesOf(events: DeliveryEvent[]): Record<string, TraceContext | null> {
  for (const event of events) if (event.trace === undefined) assert.ok(!('trace' in event), `${keyOf(event)}: no trace field when it has none`)
  return Object.fromEntries(events.map((event) => [keyOf(event), event.trace ?? null]))
}

forEachStore('event trace context', (kind) => {
  it('each event keeps the trace context of its own write, alone or in a group commit; none with no span, nor for an import; the feed and delivery bodies are unchanged', async () => {
    await withStore(kind, async (store) => {
      const shipped = { status: 'shipped' } as const
      const pending = (id: number): OrderRecord => order(BigInt(id))
      await store.orders.import(
        from([...Array.from({ length: 12 }, (_, i) => pending(i + 1)), order(13n, shipped), order(14n, shipped), order(15n, shipped), order(16n, shipped), pending(17), pending(18)]),
      )
      const expected: Record<string, TraceContext | null> = {}
      for (let id = 1; id <= 18; id++) expected[`order.created ${id}`] = null // an import's events keep none

      const tracingOff = tracingOn()
      try {
        // One by one, each its own batch.
        const [a, b, c, d, e, f] = [span(), span(), span(), span(), span(), span()]
        const placed = await within(a, () => store.orders.place({ order: NEW_ORDER }))
        assert.equal(placed.outcome, 'placed')
        expected[`order.created ${(placed as { order: { id: bigint } }).order.id}`] = a.expected
        assert.equal((await within(b, () => store.orders.cancel(1n, 1n, 'duplicate'))).outcome, 'cancelled')
        expected['order.cancelled 1'] = b.expected
        assert.equal((await within(c, () => store.orders.cancel(2n, 1n))).outcome, 'cancelled') // as v1 cancels: no reason
        expected['order.cancelled 2'] = c.expected
        assert.equal((await within(d, () => store.orders.ship(3n))).outcome, 'shipped')
        expected['order.shipped 3'] = d.expected
        assert.equal((await within(e, () => store.orders.complete(13n))).outcome, 'completed')
        expected['order.completed 13'] = e.expected
        assert.equal((await within(f, () => store.orders.update({ id: 11n, patch: { quantity: 3 } }))).outcome, 'updated')
        expected['order.updated 11'] = f.expected

        // Together, in one turn: each kind's writes in one group commit, each under a span of its own
        // (one without a tracestate), or none.
        const spans = Array.from({ length: 12 }, (_, i) => span(i === 4 ? null : `vendor=value,other=${i}`))
        const claim = { apiKeyId: 1n, key: 'trace-key', fingerprint: 'a'.repeat(64), expiresAt: new Date(Date.now() + HOUR) }
        const places = [
          within(spans[0]!, () => store.orders.place({ order: NEW_ORDER })),
          within(spans[1]!, () => store.orders.place({ order: NEW_ORDER, idempotency: claim })),
          store.orders.place({ order: NEW_ORDER }),
        ]
        const cancels = [within(spans[2]!, () => store.orders.cancel(4n, 1n, 'other')), store.orders.cancel(5n, 1n), within(spans[3]!, () => store.orders.cancel(6n, 1n))]
        const ships = [within(spans[4]!, () => store.orders.ship(7n)), within(spans[5]!, () => store.orders.ship(8n)), store.orders.ship(9n)]
        const completes = [store.orders.complete(14n), within(spans[6]!, () => store.orders.complete(15n)), within(spans[7]!, () => store.orders.complete(16n))]
        const updates = [12n, 17n, 18n].map((id, i) => {
          const update = (): ReturnType<Store['orders']['update']> => store.orders.update({ id, patch: { metadata: new Map([['cart', `c${i}`]]) } })
          return i === 1 ? update() : within(spans[i + 8]!, update)
        })
        const ids = (await Promise.all(places)).map((result) => {
          assert.equal(result.outcome, 'placed')
          return (result as { order: { id: bigint } }).order.id
        })
        for (const result of await Promise.all([...cancels, ...ships, ...completes, ...updates])) assert.match(result.outcome, /^(cancelled|shipped|completed|updated)$/)
        Object.assign(expected, {
          [`order.created ${ids[0]}`]: spans[0]!.expected,
          [`order.created ${ids[1]}`]: spans[1]!.expected,
          [`order.created ${ids[2]}`]: null,
          'order.cancelled 4': spans[2]!.expected,
          'order.cancelled 5': null,
          'order.cancelled 6': spans[3]!.expected,
          'order.shipped 7': spans[4]!.expected,
          'order.shipped 8': spans[5]!.expected,
          'order.shipped 9': null,
          'order.completed 14': null,
          'order.completed 15': spans[6]!.expected,
          'order.completed 16': spans[7]!.expected,
          'order.updated 12': spans[8]!.expected,
          'order.updated 17': null,
          'order.updated 18': spans[10]!.expected,
        })
        assert.deepEqual(spans[4]!.expected, { traceparent: spans[4]!.expected.traceparent }, 'a span without a tracestate')

        // A write with tracing on but no span active keeps none.
        assert.equal((await store.orders.ship(10n)).outcome, 'shipped')
        expected['order.shipped 10'] = null
      } finally {
        await tracingOff()
      }

      const events = await nextEvents(store)
      assert.deepEqual(tracesOf(events), expected)
      // The writes made together committed together: one transaction time per kind.
      const together = new Set(['order.cancelled 4', 'order.cancelled 5', 'order.cancelled 6', 'order.shipped 7', 'order.shipped 8', 'order.shipped 9', 'order.updated 12', 'order.updated 17', 'order.updated 18'])
      for (const type of ['order.cancelled', 'order.shipped', 'order.updated']) {
        const times = new Set(events.filter((event) => event.type === type && together.has(keyOf(event))).map((event) => event.occurredAt))
        assert.equal(times.size, 1, `the ${type} events written together share one batch`)
      }

      // The feed's page is its events' JSON as before, byte for byte: four fields each, no trace.
      const page = await store.events.read(undefined, 1000)
      const text = page.json.toString()
      assert.equal(text, `[${events.map((event) => event.json).join(',')}]`)
      for (const event of JSON.parse(text) as { type: string }[]) {
        assert.deepEqual(Object.keys(event), ['id', 'type', 'occurredAt', 'order', ...(event.type === 'order.updated' ? ['previous'] : [])])
      }
      assert.doesNotMatch(text, /trace|vendor=value/)
      // A delivery's body is the event's, whatever trace it has.
      for (const { position, type, occurredAt, json, trace: kept } of events) {
        const body = deliveryBody({ position, type, occurredAt, json, ...(kept === undefined ? {} : { trace: kept }) } as DeliveryEvent)
        assert.equal(body, `{"type":"${type}","timestamp":"${occurredAt}","data":${json}}`)
        assert.doesNotMatch(body, /trace|vendor=value/)
      }
    })
  })

  it('with tracing off, a write made in a span\'s context keeps no trace context', async () => {
    await withStore(kind, async (store) => {
      await store.orders.import(from([order(1n), order(2n)]))
      const a = span()
      assert.equal(within(a, () => activeTraceContext()), undefined, 'no context manager: the span is not active')
      const placed = await within(a, () => store.orders.place({ order: NEW_ORDER }))
      assert.equal(placed.outcome, 'placed')
      await within(a, () => Promise.all([store.orders.cancel(1n, null), store.orders.ship(2n)]))
      await within(a, () => store.orders.complete(2n))
      const traces = tracesOf(await nextEvents(store))
      assert.deepEqual(Object.keys(traces).sort(), ['order.cancelled 1', 'order.completed 2', 'order.created 1', 'order.created 2', 'order.created 3', 'order.shipped 2'])
      assert.deepEqual(new Set(Object.values(traces)), new Set([null]))
    })
  })

  if (kind === 'postgres') {
    it('a write of an order another transaction holds locked, written on its own once it is let go, keeps its trace context', async () => {
      await withStore(kind, async (store, _endpoint, database) => {
        await store.orders.import(from([order(1n), order(2n), order(3n, { status: 'shipped' }), order(4n)]))
        const other = new pg.Client({ connectionString: database.url })
        await other.connect()
        const tracingOff = tracingOn()
        try {
          const [a, b, c, d] = [span(), span(), span(), span()]
          await other.query('BEGIN')
          await other.query('SELECT 1 FROM orders WHERE id IN (1, 2, 3, 4) FOR UPDATE')
          const writes = [
            within(a, () => store.orders.cancel(1n, null)),
            within(b, () => store.orders.ship(2n)),
            within(c, () => store.orders.complete(3n)),
            within(d, () => store.orders.update({ id: 4n, patch: { quantity: 5 } })),
          ]
          await sleep(100) // the batches skip the locked rows, then each waits for its lock alone
          await other.query('COMMIT')
          assert.deepEqual((await Promise.all(writes)).map((result) => result.outcome), ['cancelled', 'shipped', 'completed', 'updated'])
          const traces = tracesOf(await nextEvents(store))
          assert.deepEqual(
            [traces['order.cancelled 1'], traces['order.shipped 2'], traces['order.completed 3'], traces['order.updated 4']],
            [a.expected, b.expected, c.expected, d.expected],
          )
        } finally {
          await tracingOff()
          await other.end()
        }
      })
    })
  }
})

it("a PostgreSQL batch with no traced write passes NULL for the trace arrays, not one NULL per write (unnest() pads them)", () => {
  assert.deepEqual(traceContextArrays([undefined, undefined]), [null, null])
  assert.deepEqual(traceContextArrays([undefined, { traceparent: 'p' }, { traceparent: 'q', tracestate: 'a=b' }]), [
    '{NULL,"p","q"}',
    '{NULL,NULL,"a=b"}',
  ])
})
