import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { before, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { EventPruner } from '../src/pruning/event-pruner.js'
import { MAX_WAIT_SECONDS } from '../src/schemas/order-event.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { bearer, expectError, forEachStore, order, records, startTestServer, within, type TestServer } from './support/harness.js'
import { BIN } from './support/server-process.js'
import { parseExact, sql, type WireOrder } from './support/v2.js'

interface WireEvent {
  id: string
  type: string
  occurredAt: string
  order: WireOrder
}

interface FeedPage {
  text: string
  data: WireEvent[]
  nextCursor: string
  /** performance.now() when the response arrived. */
  at: number
}

const MAX = 9223372036854775807n

// No bound here is a duration the machine must beat. A held request ends when an event commits, the
// instance closes or its slots are full, or else when its wait is over, and that timer never fires
// before the wait has passed since the request was sent: so an answer that comes sooner than its
// wait (the longest, 30 s, where it matters) was not the wait running out. (A commit is normally
// answered within about a second, at the next poll of the data version; that is not asserted.)
const WAIT_MS = MAX_WAIT_SECONDS * 1000
/** Long enough for what this file waits on (a request held, a waiter dropped) on a loaded machine. */
const SETTLE_MS = 15_000

async function feed(server: TestServer, key: string, query = ''): Promise<FeedPage> {
  const response = await fetch(`${server.origin}/v2/store/order-events${query === '' ? '' : `?${query}`}`, { headers: bearer(key) })
  const text = await response.text()
  const at = performance.now()
  assert.equal(response.status, 200, `${query}: ${text}`)
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
  assert.equal(response.headers.get('cache-control'), 'no-store')
  const body = parseExact<{ data: WireEvent[]; nextCursor: string }>(text)
  assert.deepEqual(Object.keys(body), ['data', 'nextCursor'], text)
  assert.match(body.nextCursor, /^(0|[1-9][0-9]*)$/)
  return { text, at, ...body }
}

/** Requests held by the server's event feed, as its metrics say. */
async function waiting(server: { origin: string }): Promise<number> {
  const text = await (await fetch(`${server.origin}/metrics`)).text()
  const match = /^order_events_waiting (\d+)$/m.exec(text)
  assert.ok(match !== null, 'order_events_waiting is in /metrics')
  return Number(match[1])
}

/** The newest position of the feed, read directly from the store. */
async function newest(store: Store): Promise<bigint> {
  let next = (await store.events.read(undefined, 1000)).next
  for (;;) {
    const page = await store.events.read(next, 1000)
    if (page.count === 0) return next
    next = page.next
  }
}

forEachStore('order event feed over HTTP', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })
    key = await server.createKey()
  })

  it('starts empty: no events and nextCursor "0", and the first events follow that cursor', async () => {
    const empty = await feed(server, key)
    assert.equal(empty.text, '{"data":[],"nextCursor":"0"}')
    assert.equal((await feed(server, key, 'after=0')).text, '{"data":[],"nextCursor":"0"}')
    await server.importOrders([
      { id: 1n, petId: 10n, quantity: 2, shipDate: '2026-12-01T08:30:00.000Z' },
      { id: MAX, petId: MAX - 1n, quantity: 1 },
    ])
    const first = await feed(server, key, `after=${empty.nextCursor}`)
    assert.deepEqual(first.data.map((event) => [event.type, event.order.id]), [['order.created', '1'], ['order.created', String(MAX)]])
    assert.ok(first.text.includes(`"order":{"id":${MAX},`), 'int64 ids exact in the order')
    assert.deepEqual(first, { ...(await feed(server, key)), at: first.at }, 'from the oldest retained event, inclusive, without after')
  })

  it('writes the store page\'s bytes between {"data": and the nextCursor, which is the last event\'s id', async () => {
    const page = await server.store.events.read(undefined, 100)
    const got = await feed(server, key)
    assert.equal(got.text, `{"data":${page.json.toString()},"nextCursor":"${page.next}"}`)
    assert.equal(got.nextCursor, got.data.at(-1)!.id)
    for (const event of got.data) {
      assert.deepEqual(Object.keys(event), ['id', 'type', 'occurredAt', 'order'])
      assert.match(event.id, /^[1-9][0-9]*$/)
      assert.match(event.occurredAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      assert.equal(event.order.status, 'pending')
    }
  })

  it('pages by limit (default 100) and resumes after a nextCursor or an event id alike, each event once', async () => {
    await server.importOrders(Array.from({ length: 150 }, (_, i) => ({ id: BigInt(1000 + i), quantity: 1 })))
    const all = await feed(server, key, 'limit=1000')
    assert.equal(all.data.length, 152)
    assert.deepEqual(all.data.map((event) => BigInt(event.id)), all.data.map((event) => BigInt(event.id)).sort((a, b) => (a < b ? -1 : 1)))
    const first = await feed(server, key)
    assert.equal(first.data.length, 100, 'default limit')
    const rest = await feed(server, key, `after=${first.nextCursor}`)
    assert.deepEqual([...first.data, ...rest.data].map((event) => event.id), all.data.map((event) => event.id))
    let after = '0'
    const walked: string[] = []
    for (let pages = 0; pages < 100; pages++) {
      const page = await feed(server, key, `after=${after}&limit=7`)
      assert.ok(page.data.length <= 7)
      walked.push(...page.data.map((event) => event.id))
      if (page.data.length === 0) break
      after = pages % 2 === 0 ? page.nextCursor : page.data.at(-1)!.id // an event's id is a cursor too
    }
    assert.deepEqual(walked, all.data.map((event) => event.id))
    assert.equal((await feed(server, key, 'limit=1')).data.length, 1)
    const middle = all.data[50]!
    assert.deepEqual((await feed(server, key, `after=${middle.id}&limit=2`)).data, all.data.slice(51, 53))
  })

  it('keeps the cursor on an empty page: nextCursor is the after it was given, and the next event follows it', async () => {
    const head = String(await newest(server.store))
    for (const query of [`after=${head}`, `after=${head}&limit=1`, `after=${head}&wait=0`]) {
      assert.equal((await feed(server, key, query)).text, `{"data":[],"nextCursor":"${head}"}`, query)
    }
    await fetch(`${server.origin}/v1/store/orders/1000`, { method: 'DELETE', headers: bearer(key) })
    const next = await feed(server, key, `after=${head}`)
    assert.deepEqual(next.data.map((event) => [event.type, event.order.id, event.order.status]), [['order.cancelled', '1000', 'cancelled']])
    assert.ok(BigInt(next.nextCursor) > BigInt(head))
  })

  const refused: [string, string][] = [
    ['cursor=5', 'cursor'],
    ['After=5', 'After'],
    ['after=1&after=2', 'after'],
    ['limit=1&limit=2', 'limit'],
    ['wait=1&wait=1', 'wait'],
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=-1', 'limit'],
    ['limit=ten', 'limit'],
    ['wait=31', 'wait'],
    ['wait=-1', 'wait'],
    ['wait=', 'wait'],
    ['wait=0.5', 'wait'],
    ['wait=1s', 'wait'],
    ['wait=1e1', 'wait'],
  ]
  for (const [query, parameter] of refused) {
    it(`refuses ?${query} with 400 invalid_parameter naming ${parameter}`, async () => {
      const response = await fetch(`${server.origin}/v2/store/order-events?${query}`, { headers: bearer(key) })
      const body = await expectError(response, 400, 'invalid_parameter')
      assert.ok((body.message as string).includes(parameter), `${body.message as string} names ${parameter}`)
    })
  }

  it('accepts the bounds of limit and wait', async () => {
    for (const query of ['limit=1', 'limit=1000', 'wait=0', 'limit=1&wait=30']) await feed(server, key, query)
  })

  it('refuses an after that is not a position of this feed with 400 invalid_cursor: malformed, from the list, or past the end', async () => {
    const head = await newest(server.store)
    const list = await (await fetch(`${server.origin}/v2/store/orders?limit=1`, { headers: bearer(key) })).json() as { nextCursor: string }
    assert.ok(list.nextCursor.length > 20, 'a cursor of listOrders')
    for (const after of ['', 'abc', '-1', '+1', '01', '1.0', '1e3', '0x10', ' 1', list.nextCursor, String(MAX + 1n), '99999999999999999999', String(head + 1n), String(MAX)]) {
      const response = await fetch(`${server.origin}/v2/store/order-events?after=${encodeURIComponent(after)}`, { headers: bearer(key) })
      const body = await expectError(response, 400, 'invalid_cursor')
      assert.match(body.message as string, /after/, after)
    }
    // a long poll with a bad cursor is refused at once, not held: sooner than its wait
    const started = performance.now()
    await expectError(await fetch(`${server.origin}/v2/store/order-events?after=${head + 1n}&wait=${MAX_WAIT_SECONDS}`, { headers: bearer(key) }), 400, 'invalid_cursor')
    assert.ok(performance.now() - started < WAIT_MS, 'refused before its wait was over')
  })

  it('answers 401 without a valid key and 403 without orders:read, before looking at the query', async () => {
    await expectError(await fetch(`${server.origin}/v2/store/order-events`), 401, 'unauthorized')
    await expectError(await fetch(`${server.origin}/v2/store/order-events?bogus=1&after=x`), 401, 'unauthorized')
    await expectError(await fetch(`${server.origin}/v2/store/order-events`, { headers: bearer('pso_nope') }), 401, 'unauthorized')
    const cancelOnly = await server.createKey({ scopes: ['orders:cancel', 'pets:read'] })
    await expectError(await fetch(`${server.origin}/v2/store/order-events?wait=5`, { headers: bearer(cancelOnly) }), 403, 'insufficient_scope')
    await expectError(await fetch(`${server.origin}/v2/store/order-events?after=x`, { headers: bearer(cancelOnly) }), 403, 'insufficient_scope')
    const readOnly = await server.createKey({ scopes: ['orders:read'] })
    await feed(server, readOnly)
  })

  it('answers HEAD like GET without a body, OPTIONS with Allow, other methods 405 with Allow', async () => {
    const head = await fetch(`${server.origin}/v2/store/order-events?limit=1`, { method: 'HEAD', headers: bearer(key) })
    assert.equal(head.status, 200)
    assert.equal(await head.text(), '')
    const options = await fetch(`${server.origin}/v2/store/order-events`, { method: 'OPTIONS' })
    assert.equal(options.status, 204)
    assert.equal(options.headers.get('allow'), 'GET, HEAD, OPTIONS')
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const response = await fetch(`${server.origin}/v2/store/order-events`, { method, headers: bearer(key) })
      assert.equal(response.headers.get('allow'), 'GET, HEAD, OPTIONS')
      await expectError(response, 405, 'method_not_allowed')
    }
    await expectError(await fetch(`${server.origin}/v2/store/order-events/1`, { headers: bearer(key) }), 404, 'not_found')
  })

  it('holds a request with wait until an event commits on this instance, then answers with it, not at the end of the wait', async () => {
    const head = String(await newest(server.store))
    const sent = performance.now()
    const held = feed(server, key, `after=${head}&wait=${MAX_WAIT_SECONDS}`)
    await within(SETTLE_MS, 'the request is held', async () => (await waiting(server)) === 1)
    const response = await fetch(`${server.origin}/v2/store/orders/1001/cancel`, { method: 'POST', headers: bearer(key) })
    assert.equal(response.status, 200)
    const committed = performance.now()
    const page = await held
    assert.deepEqual(page.data.map((event) => [event.type, event.order.id]), [['order.cancelled', '1001']])
    assert.equal(page.nextCursor, page.data[0]!.id)
    assert.ok(page.at - sent < WAIT_MS, `woken by the commit (answered ${Math.round(page.at - committed)} ms after it), not at the end of the wait`)
    assert.equal(await waiting(server), 0)
  })

  it('answers a wait that no event ends with an empty page and the same cursor, once the wait is over', async () => {
    const head = String(await newest(server.store))
    const started = performance.now()
    const page = await feed(server, key, `after=${head}&wait=1`)
    const took = page.at - started
    assert.equal(page.text, `{"data":[],"nextCursor":"${head}"}`)
    // Held for its wait (a lower bound). Answered, not held for ever: the page above came, and the
    // server holds no request any more.
    assert.ok(took >= 950, `answered after ${Math.round(took)} ms`)
    assert.equal(await waiting(server), 0)
  })

  it('wakes a held request for events committed by another store on the same database, before its wait is over', async () => {
    // A second Store: on SQLite another connection to the file (as another process has), on
    // PostgreSQL another pool (as another instance has); the server learns of its commits only
    // through the database.
    const other = await openStore(server.database.config)
    try {
      for (let round = 0; round < 3; round++) {
        const head = String(await newest(server.store))
        const sent = performance.now()
        const held = feed(server, key, `after=${head}&wait=${MAX_WAIT_SECONDS}`)
        await within(SETTLE_MS, 'the request is held', async () => (await waiting(server)) === 1)
        await sleep(150 * round) // at different phases of the poll
        const id = BigInt(1010 + round)
        assert.equal((await other.orders.cancel(id, null, 'duplicate')).outcome, 'cancelled')
        const committed = performance.now()
        const page = await held
        assert.deepEqual(page.data.map((event) => [event.type, event.order.id, event.order.cancellationReason]), [['order.cancelled', String(id), 'duplicate']])
        assert.ok(page.at - sent < WAIT_MS, `woken by the commit (answered ${Math.round(page.at - committed)} ms after it), not at the end of the wait`)
      }
    } finally {
      await other.close()
    }
  })

  it('wakes a held request for a cancel through another instance on the same database, before its wait is over', async () => {
    const other = await startTestServer(kind, { database: server.database })
    try {
      const head = String(await newest(server.store))
      const sent = performance.now()
      const held = feed(server, key, `after=${head}&wait=${MAX_WAIT_SECONDS}`)
      await within(SETTLE_MS, 'the request is held', async () => (await waiting(server)) === 1)
      const response = await fetch(`${other.origin}/v1/store/orders/1015`, { method: 'DELETE', headers: bearer(key) })
      assert.equal(response.status, 204)
      const answered = performance.now()
      const page = await held
      assert.deepEqual(page.data.map((event) => [event.type, event.order.id]), [['order.cancelled', '1015']])
      assert.ok(page.at - sent < WAIT_MS, `woken (answered ${Math.round(page.at - answered)} ms after the other instance's 204), not at the end of the wait`)
    } finally {
      await other.close()
    }
  })

  it('wakes a held request for an order shipped by the CLI in another process, before its wait is over', async () => {
    const head = String(await newest(server.store))
    const sent = performance.now()
    const held = feed(server, key, `after=${head}&wait=${MAX_WAIT_SECONDS}`)
    await within(SETTLE_MS, 'the request is held', async () => (await waiting(server)) === 1)
    // Asynchronously: the server runs in this process and must keep serving meanwhile.
    const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'orders', 'ship', '1020'], {
      env: { ...process.env, DATABASE_URL: server.database.url },
      timeout: 30_000,
    })
    const exited = performance.now()
    assert.match(stdout, /1020/)
    const page = await held
    assert.deepEqual(page.data.map((event) => [event.type, event.order.id, event.order.status]), [['order.shipped', '1020', 'shipped']])
    assert.ok(page.at - sent < WAIT_MS, `woken (answered ${Math.round(page.at - exited)} ms after the CLI exited), not at the end of the wait`)
  })

  it('answers every held request, each from its own cursor, and at most limit events each', async () => {
    const head = await newest(server.store)
    const helds = [feed(server, key, `after=${head}&wait=10&limit=2`), feed(server, key, `after=${head}&wait=10`)] as const
    await within(SETTLE_MS, 'both requests are held', async () => (await waiting(server)) === 2)
    await server.store.orders.import(records([1030n, 1031n, 1032n].map((id) => order({ id, status: 'shipped' }))))
    const [small, big] = await Promise.all(helds)
    assert.deepEqual(small.data.map((event) => [event.type, event.order.id]), [['order.updated', '1030'], ['order.updated', '1031']])
    assert.deepEqual(big.data.map((event) => event.order.id), ['1030', '1031', '1032'])
    assert.equal(small.nextCursor, small.data[1]!.id)
  })

  it('drops a held request whose client disconnects', async () => {
    const head = await newest(server.store)
    const controller = new AbortController()
    const held = fetch(`${server.origin}/v2/store/order-events?after=${head}&wait=20`, { headers: bearer(key), signal: controller.signal })
    await within(SETTLE_MS, 'the request is held', async () => (await waiting(server)) === 1)
    controller.abort()
    await assert.rejects(held)
    await within(SETTLE_MS, 'the waiter is dropped (before its 20 s wait is over)', async () => (await waiting(server)) === 0)
  })

  it('is 410 events_expired for a cursor before the oldest retained event; without after it starts there', async () => {
    const all = await feed(server, key, 'limit=1000')
    const cut = all.data[9]!
    // The first ten events occurred long ago; one pass of the pruner (batches of 3) deletes them.
    await sql(server, `UPDATE order_events SET occurred_at = ? WHERE position <= ?`, [
      kind === 'sqlite' ? '2020-01-01T00:00:00.000Z' : new Date('2020-01-01T00:00:00.000Z'),
      Number(cut.id),
    ])
    const log = { info: () => {}, warn: (fields: object) => assert.fail(`prune failed: ${JSON.stringify(fields)}`) }
    const deleted = await new EventPruner(server.store.events, { retentionDays: 30, batch: 3, log }).prune()
    assert.equal(deleted, 10)
    for (const after of ['0', all.data[0]!.id, all.data[8]!.id]) {
      const response = await fetch(`${server.origin}/v2/store/order-events?after=${after}`, { headers: bearer(key) })
      const body = await expectError(response, 410, 'events_expired')
      assert.match(body.message as string, new RegExp(`after ${after}\\b`))
    }
    const response = await fetch(`${server.origin}/v2/store/order-events?after=0&wait=5`, { headers: bearer(key) })
    await expectError(response, 410, 'events_expired')
    const oldest = await feed(server, key, 'limit=1000')
    assert.deepEqual(oldest.data.map((event) => event.id), all.data.slice(10).map((event) => event.id))
    assert.deepEqual((await feed(server, key, `after=${cut.id}&limit=1`)).data.map((event) => event.id), [all.data[10]!.id], 'resuming at the cut loses nothing')
  })
})

forEachStore('order event feed: limits and shutdown', (kind) => {
  it('holds at most EVENTS_MAX_WAITING requests; past it a request is answered at once with what there is', async () => {
    const server = await startTestServer(kind, { env: { EVENTS_MAX_WAITING: '2', RATE_LIMIT_PER_KEY: '0' } })
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: 2n }])
    const held = [feed(server, key, `after=2&wait=${MAX_WAIT_SECONDS}`), feed(server, key, `after=2&wait=${MAX_WAIT_SECONDS}`)]
    await within(SETTLE_MS, 'two requests are held', async () => (await waiting(server)) === 2)
    const started = performance.now()
    const third = await feed(server, key, `after=2&wait=${MAX_WAIT_SECONDS}`)
    assert.equal(third.text, '{"data":[],"nextCursor":"2"}')
    assert.ok(third.at - started < WAIT_MS, `answered after ${Math.round(third.at - started)} ms, not at the end of its wait`)
    assert.equal((await feed(server, key, 'after=1&wait=20')).data.length, 1, 'a request with events is answered whatever the count')
    assert.equal(await waiting(server), 2)
    await server.store.orders.cancel(1n, null)
    for (const page of await Promise.all(held)) assert.deepEqual(page.data.map((event) => event.type), ['order.cancelled'])
    await server.close()
  })

  it('wakes a long poll without after on an empty feed with the first events', async () => {
    const server = await startTestServer(kind)
    const key = await server.createKey()
    const held = feed(server, key, 'wait=10')
    await within(SETTLE_MS, 'the request is held', async () => (await waiting(server)) === 1)
    await server.importOrders([{ id: 5n }, { id: 6n }])
    const page = await held
    assert.deepEqual(page.data.map((event) => [event.type, event.order.id]), [['order.created', '5'], ['order.created', '6']])
    assert.equal(page.nextCursor, page.data[1]!.id)
    await server.close()
  })

  it('holds no database connection for a held request: 20 held on a pool of 2, and the API still answers at once', { skip: kind === 'sqlite' && 'SQLite has no pool' }, async () => {
    const server = await startTestServer(kind, { env: { DATABASE_POOL_SIZE: '2', LIST_DATABASE_STREAMS: '1', RATE_LIMIT_PER_KEY: '0' } })
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: 2n }])
    const held = Array.from({ length: 20 }, () => feed(server, key, `after=2&wait=${MAX_WAIT_SECONDS}`))
    await within(SETTLE_MS, 'the requests are held', async () => (await waiting(server)) === 20)
    // Answered while all 20 are still held: had they held the 2 connections, the list would have
    // waited for one until a held request ended.
    const list = await fetch(`${server.origin}/v2/store/orders`, { headers: bearer(key) })
    assert.equal(list.status, 200, await list.text())
    assert.equal(await waiting(server), 20, 'the list was answered while every request was still held')
    const cancel = await fetch(`${server.origin}/v2/store/orders/1/cancel`, { method: 'POST', headers: bearer(key) })
    assert.equal(cancel.status, 200, await cancel.text())
    for (const page of await Promise.all(held)) assert.deepEqual(page.data.map((event) => [event.type, event.order.id]), [['order.cancelled', '1']])
    await server.close()
  })

  it('holds no request when EVENTS_MAX_WAITING is 0', async () => {
    const server = await startTestServer(kind, { env: { EVENTS_MAX_WAITING: '0' } })
    const key = await server.createKey()
    const started = performance.now()
    const page = await feed(server, key, `wait=${MAX_WAIT_SECONDS}`)
    assert.equal(page.text, '{"data":[],"nextCursor":"0"}')
    assert.ok(page.at - started < WAIT_MS, `answered after ${Math.round(page.at - started)} ms, not at the end of its wait`)
    await server.close()
  })

  it('answers held requests at once when the server closes, and closes their connections', async () => {
    const server = await startTestServer(kind)
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }])
    const sent = performance.now()
    const held = Array.from({ length: 3 }, () =>
      fetch(`${server.origin}/v2/store/order-events?after=1&wait=${MAX_WAIT_SECONDS}`, { headers: bearer(key) }).then(async (response) => ({
        status: response.status,
        connection: response.headers.get('connection'),
        text: await response.text(),
        at: performance.now(),
      })),
    )
    await within(SETTLE_MS, 'the requests are held', async () => (await waiting(server)) === 3)
    const closing = performance.now()
    await server.close()
    const closed = performance.now()
    for (const answer of await Promise.all(held)) {
      assert.deepEqual({ ...answer, at: 0 }, { status: 200, connection: 'close', text: '{"data":[],"nextCursor":"1"}', at: 0 })
      assert.ok(answer.at - sent < WAIT_MS, `answered ${Math.round(answer.at - closing)} ms after close, not at the end of its wait`)
    }
    // close() did not wait for the held requests to run out their wait.
    assert.ok(closed - sent < WAIT_MS, `closed in ${Math.round(closed - closing)} ms`)
  })

  it('holds a request no longer than the idle timeout allows (HTTP_IDLE_TIMEOUT_MS less one second)', async () => {
    const server = await startTestServer(kind, { env: { HTTP_IDLE_TIMEOUT_MS: '2000' } })
    const key = await server.createKey()
    const started = performance.now()
    const page = await feed(server, key, 'wait=30')
    assert.equal(page.text, '{"data":[],"nextCursor":"0"}')
    const took = page.at - started
    // Held for the idle timeout less one second (a lower bound), and answered: a hold past the idle
    // timeout would have had its socket closed, and feed() would have thrown.
    assert.ok(took >= 950, `answered after ${Math.round(took)} ms: held for the idle timeout less one second`)
    await server.close()
  })
})
