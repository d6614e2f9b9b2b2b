import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { createKey } from '../src/keys/create-key.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { bearer, createDatabase, forEachStore, order, records, type TestDatabaseHandle } from './support/harness.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'
import { parseExact, type WireOrder } from './support/v2.js'

interface WireEvent {
  id: string
  type: string
  occurredAt: string
  order: WireOrder
}

const PENDING = 240 // orders 1–240 are pending: each is cancelled exactly once
const SHIPPED = 40 // orders 241–280 are shipped: every cancel of them is refused, no event
const CLIENTS = 8
const ATTEMPTS_PER_ORDER = 3

/** A consumer of the feed: long polls from each nextCursor until `done()` and the feed is drained. */
async function follow(origins: () => string, key: string, done: () => boolean): Promise<{ events: WireEvent[]; polls: number }> {
  const events: WireEvent[] = []
  let after: string | undefined
  let polls = 0
  for (;;) {
    const finished = done() // read before the poll: a poll after every cancel has answered sees them all
    const query = new URLSearchParams({ limit: '37', wait: finished ? '0' : '2', ...(after === undefined ? {} : { after }) })
    const response = await fetch(`${origins()}/v2/store/order-events?${query}`, { headers: bearer(key) })
    const text = await response.text()
    assert.equal(response.status, 200, text)
    const page = parseExact<{ data: WireEvent[]; nextCursor: string }>(text)
    polls++
    events.push(...page.data)
    if (page.data.length > 0) assert.equal(page.nextCursor, page.data.at(-1)!.id)
    else if (after !== undefined) assert.equal(page.nextCursor, after, 'an empty page keeps its cursor')
    after = page.nextCursor
    if (finished && page.data.length === 0) return { events, polls }
    if (polls > 5000) assert.fail('the consumer does not catch up')
  }
}

// Two `serve` processes on one database, cancels through v1 and v2 on both, and consumers following
// the feed with long polls on either: every cancellation is one event, received once, in order.
forEachStore('order event feed across two instances under concurrent cancels', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let key: string
  let servers: ServerProcess[] = []

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    key = (await createKey(store.apiKeys, { name: 'feed' })).secret
    await store.orders.import(
      records(Array.from({ length: PENDING + SHIPPED }, (_, i) => order({ id: BigInt(i + 1), petId: 7n, status: i < PENDING ? 'pending' : 'shipped' }))),
    )
    servers = await Promise.all([0, 1].map(() => spawnServer(database.url, { RATE_LIMIT_PER_KEY: '0' })))
  })
  after(async () => {
    for (const server of servers) server.child.kill('SIGTERM')
    await Promise.all(servers.map((server) => server.exited))
    await store?.close()
    await database?.dispose()
  })

  it('gives every order.cancelled event exactly once, for the orders actually cancelled, none missing, each after its order.created', async () => {
    // Three attempts per order, shuffled, each through v1 DELETE or v2 POST …/cancel on either instance.
    const attempts = Array.from({ length: PENDING + SHIPPED }, (_, i) => i + 1).flatMap((id) =>
      Array.from({ length: ATTEMPTS_PER_ORDER }, (_, n) => ({ id, v2: (id + n) % 2 === 0, instance: (id * 7 + n) % 2 })),
    )
    for (let i = attempts.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1))
      ;[attempts[i], attempts[j]] = [attempts[j]!, attempts[i]!]
    }
    let cancelsDone = false
    let alternate = 0
    const consumers = [
      follow(() => servers[0]!.origin, key, () => cancelsDone),
      follow(() => servers[1]!.origin, key, () => cancelsDone),
      follow(() => servers[alternate++ % 2]!.origin, key, () => cancelsDone),
    ]

    // How many long polls the instances hold, sampled during the storm: the consumers must have waited.
    let mostHeld = 0
    const sampling = (async () => {
      while (!cancelsDone) {
        for (const server of servers) {
          const metrics = await (await fetch(`${server.origin}/metrics`)).text()
          mostHeld = Math.max(mostHeld, Number(/^order_events_waiting (\d+)$/m.exec(metrics)?.[1] ?? 0))
        }
        await sleep(20)
      }
    })()

    const v2Bodies = new Map<number, string>()
    const v1Cancelled = new Set<number>()
    let next = 0
    const client = async (): Promise<void> => {
      while (next < attempts.length) {
        const { id, v2, instance } = attempts[next++]!
        const origin = servers[instance]!.origin
        const response = v2
          ? await fetch(`${origin}/v2/store/orders/${id}/cancel`, {
              method: 'POST',
              headers: { ...bearer(key), 'content-type': 'application/json' },
              body: '{"reason":"duplicate"}',
            })
          : await fetch(`${origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) })
        const text = await response.text()
        if (id > PENDING) {
          assert.equal(response.status, 409, `order ${id} is shipped: ${text}`)
        } else if (v2) {
          assert.equal(response.status, 200, text)
          const previous = v2Bodies.get(id)
          assert.ok(previous === undefined || previous === text, `order ${id}: every v2 answer is the same order`)
          v2Bodies.set(id, text)
        } else {
          assert.ok(response.status === 204 || response.status === 404, `order ${id}: ${response.status} ${text}`)
          if (response.status === 204) {
            assert.ok(!v1Cancelled.has(id), `order ${id}: two 204s`)
            v1Cancelled.add(id)
          }
        }
      }
    }
    try {
      await Promise.all(Array.from({ length: CLIENTS }, () => client()))
    } finally {
      cancelsDone = true
    }
    const followed = await Promise.all(consumers)
    await sampling
    assert.ok(mostHeld >= 1, 'the consumers were held by long polls during the cancels')

    // The whole feed, read directly once everything has committed: the reference.
    const all: WireEvent[] = []
    let after: bigint | undefined
    for (;;) {
      const page = await store.events.read(after, 1000)
      all.push(...parseExact<WireEvent[]>(page.json.toString()))
      if (page.count === 0) break
      after = page.next
    }
    const created = all.filter((event) => event.type === 'order.created')
    const cancelled = all.filter((event) => event.type === 'order.cancelled')
    assert.equal(all.length, created.length + cancelled.length, 'no other event')
    assert.deepEqual(created.map((event) => Number(event.order.id)).sort((a, b) => a - b), Array.from({ length: PENDING + SHIPPED }, (_, i) => i + 1))
    assert.deepEqual(
      cancelled.map((event) => Number(event.order.id)).sort((a, b) => a - b),
      Array.from({ length: PENDING }, (_, i) => i + 1),
      'one order.cancelled per pending order, none for a shipped one',
    )
    const position = new Map(all.map((event, index) => [`${event.type} ${event.order.id}`, index]))
    for (const event of cancelled) {
      const id = Number(event.order.id)
      assert.equal(event.order.status, 'cancelled')
      assert.ok(position.get(`order.created ${id}`)! < position.get(`order.cancelled ${id}`)!, `order ${id}: created before cancelled`)
      const v2 = v2Bodies.get(id)
      if (v2 !== undefined) assert.deepEqual(event.order, parseExact<WireOrder>(v2), `order ${id}: the event shows the order every v2 cancel answered`)
      // Exactly one request changed the order: a v1 DELETE answered 204 (no reason), or else a v2 cancel.
      assert.equal(event.order.cancellationReason, v1Cancelled.has(id) ? undefined : 'duplicate', `order ${id}`)
    }
    // Every consumer, whichever instance it polled, received exactly that feed: each event once, in order.
    for (const [n, { events, polls }] of followed.entries()) {
      assert.deepEqual(events.map((event) => event.id), all.map((event) => event.id), `consumer ${n} (${polls} polls)`)
      assert.deepEqual(events, all, `consumer ${n}: the same events`)
    }
  })
})
