import assert from 'node:assert/strict'
import { after, afterEach, it } from 'node:test'
import Database from 'better-sqlite3'
import fastJson from 'fast-json-stringify'
import type { OrderV2Record, IdempotencyClaim, NewOrder, OrderRecord, PlaceRequest, PlaceResult } from '../src/domain/orders.js'
import { OrderV2, toApiOrderV2 } from '../src/schemas/order-v2.js'
import { openStore } from '../src/store/open-store.js'
import { SQLITE_MIGRATIONS } from '../src/store/sqlite/migrations.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, forEachStore, type StoreKind, type TestDatabaseHandle } from './support/harness.js'
import { connectSql } from './support/sql.js'

// The writes of v2 (place, ship, complete, the Idempotency-Key records and their pruning) on both
// stores, on real databases: what the API's answers rely on.

const TWO_53 = 2n ** 53n
const INT64_MAX = 2n ** 63n - 1n
const HOUR = 3_600_000
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

const serializeOrder = fastJson(OrderV2 as object, {}) as (order: unknown) => string

/** The JSON the OrderV2 serializer writes for an order: what events and replays must hold byte for byte. */
function orderJson(order: OrderV2Record): string {
  return serializeOrder(toApiOrderV2(order))
}

function imported(id: bigint, fields: Partial<OrderRecord> = {}): OrderRecord {
  return { id, petId: 7n, quantity: 1, shipDate: null, complete: false, status: 'pending', ...fields }
}

async function* from<T>(items: Iterable<T>): AsyncIterable<T> {
  yield* items
}

const NEW_ORDER: NewOrder = { petId: TWO_53 + 3n, quantity: 2, shipDate: '2026-12-01T09:30:00.000Z' }

function claim(key: string, fields: Partial<IdempotencyClaim> = {}): IdempotencyClaim {
  return { apiKeyId: 1n, key, fingerprint: 'a'.repeat(64), expiresAt: new Date(Date.now() + 24 * HOUR), ...fields }
}

function placed(result: PlaceResult): OrderV2Record {
  assert.equal(result.outcome, 'placed', JSON.stringify(result, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)))
  return (result as { order: OrderV2Record }).order
}

interface RawEvent {
  position: bigint
  type: string
  occurredAt: string
  orderId: bigint
  /** The event's order as the feed holds it, byte for byte. */
  orderJson: string
}

/** Every event after `after` (exclusive), read from the feed's own pages; ids exact, order bytes as written. */
async function eventsAfter(store: Store, after: bigint | undefined): Promise<{ events: RawEvent[]; next: bigint }> {
  const events: RawEvent[] = []
  let cursor = after
  for (;;) {
    const page = await store.events.read(cursor, 1000)
    const text = page.json.toString()
    // An event's order is its last field, and an order holds no nested object.
    const matches = [...text.matchAll(/\{"id":"(\d+)","type":"([a-z.]+)","occurredAt":"([^"]+)","order":(\{"id":(-?\d+),[^}]*\})\}/g)]
    assert.equal(matches.length, page.count, text)
    for (const match of matches) {
      events.push({ position: BigInt(match[1]!), type: match[2]!, occurredAt: match[3]!, orderJson: match[4]!, orderId: BigInt(match[5]!) })
    }
    cursor = page.next
    if (page.count < 1000) return { events, next: page.next }
  }
}

async function head(store: Store): Promise<bigint> {
  return (await eventsAfter(store, undefined)).next
}

/** How many orders the store holds, whatever their status. */
async function orderCount(database: TestDatabaseHandle): Promise<number> {
  const sql = await connectSql(database)
  try {
    const [row] = await sql.query<{ n: string | number | bigint }>('SELECT CAST(count(*) AS TEXT) AS n FROM orders')
    return Number(row!.n)
  } finally {
    await sql.close()
  }
}

forEachStore('store writes', (kind: StoreKind) => {
  // Each test its own database (places depend on every id held), closed when it ends.
  const opened: Store[] = []
  const databases: TestDatabaseHandle[] = []

  async function fresh(): Promise<{ database: TestDatabaseHandle; store: Store }> {
    const database = await createDatabase(kind)
    databases.push(database)
    const store = await open(database)
    await store.migrate()
    return { database, store }
  }

  async function open(database: TestDatabaseHandle): Promise<Store> {
    const store = await openStore(database.config)
    opened.push(store)
    return store
  }

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((store) => store.close()))
  })

  after(async () => {
    await Promise.all(databases.splice(0).map((database) => database.dispose()))
  })

  it('places above every id held, imported ones included: exact past 2^53, consecutive within a batch, never reused after reopening', async () => {
    const { database, store } = await fresh()
    assert.equal(placed(await store.orders.place({ order: NEW_ORDER })).id, 1n, 'an empty store starts at 1')
    await store.orders.import(from([imported(TWO_53 + 1n), imported(5n)]))
    const batch = await Promise.all(Array.from({ length: 8 }, () => store.orders.place({ order: NEW_ORDER })))
    const ids = batch.map((result) => placed(result).id).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    assert.deepEqual(ids, Array.from({ length: 8 }, (_, i) => TWO_53 + 2n + BigInt(i)))

    const order = placed(batch[0]!)
    assert.equal(order.status, 'pending')
    assert.equal(order.complete, false)
    assert.equal(order.petId, TWO_53 + 3n)
    assert.deepEqual(await store.orders.find(order.id), order, 'the answer is the order as stored')

    await store.close()
    const reopened = await open(database)
    const next = placed(await reopened.orders.place({ order: { petId: 1n, quantity: 1, shipDate: null } }))
    assert.equal(next.id, TWO_53 + 10n)
    assert.equal((await reopened.orders.find(next.id))?.shipDate, null)
    assert.equal(await orderCount(database), 12)
  })

  it('ids_exhausted when 9223372036854775807 is held: nothing of the place written, the rest of its batch unaffected', async () => {
    const { database, store } = await fresh()
    await store.orders.import(from([imported(INT64_MAX), imported(10n)]))
    const start = await head(store)
    const version = await store.orders.dataVersion()
    const [first, withKey, ship] = await Promise.all([
      store.orders.place({ order: NEW_ORDER }),
      store.orders.place({ order: NEW_ORDER, idempotency: claim('exhausted') }),
      store.orders.ship(10n),
    ])
    assert.deepEqual(first, { outcome: 'ids_exhausted' })
    assert.deepEqual(withKey, { outcome: 'ids_exhausted' })
    assert.equal(ship.outcome, 'shipped')
    assert.equal(await orderCount(database), 2)
    assert.deepEqual(
      (await eventsAfter(store, start)).events.map((event) => event.type),
      ['order.shipped'],
    )
    assert.equal(await store.orders.dataVersion(), version + 1n, 'bumped once, for the ship')
    // No key record was kept: once an id is free again (never, here) the key would place.
    assert.deepEqual(await store.orders.place({ order: NEW_ORDER, idempotency: claim('exhausted') }), { outcome: 'ids_exhausted' })
  })

  it('a stored key is still answered once every id is taken: replayed, not ids_exhausted', async () => {
    const { store } = await fresh()
    const first = placed(await store.orders.place({ order: NEW_ORDER, idempotency: claim('kept') }))
    await store.orders.import(from([imported(INT64_MAX)]))
    assert.deepEqual(await store.orders.place({ order: NEW_ORDER, idempotency: claim('kept') }), {
      outcome: 'replayed',
      orderId: first.id,
      status: 201,
      body: orderJson(first),
    })
    const otherBody = claim('kept', { fingerprint: 'b'.repeat(64) })
    assert.deepEqual(await store.orders.place({ order: { ...NEW_ORDER, quantity: 3 }, idempotency: otherBody }), { outcome: 'key_reused' })
  })

  it("writes exactly one order.created event per place, with the order's JSON, and bumps the data version", async () => {
    const { store } = await fresh()
    const start = await head(store)
    const version = await store.orders.dataVersion()
    const before = new Date().toISOString()
    const orders = (
      await Promise.all([
        store.orders.place({ order: NEW_ORDER }),
        store.orders.place({ order: { petId: 9n, quantity: 1000, shipDate: null }, idempotency: claim('k1') }),
        store.orders.place({ order: NEW_ORDER }),
      ])
    )
      .map(placed)
      .sort((a, b) => (a.id < b.id ? -1 : 1))
    const afterwards = new Date().toISOString()
    const { events } = await eventsAfter(store, start)
    assert.deepEqual(
      events.map((event) => [event.type, event.orderId]),
      orders.map((order) => ['order.created', order.id]),
    )
    for (const [i, event] of events.entries()) {
      assert.equal(event.orderJson, orderJson(orders[i]!))
      assert.ok(event.occurredAt >= before && event.occurredAt <= afterwards, event.occurredAt)
    }
    assert.ok((await store.orders.dataVersion()) > version)
  })

  it('replays a key used with the same body, also after the store is closed and reopened; the first response, nothing placed', async () => {
    const { database, store } = await fresh()
    const first = placed(await store.orders.place({ order: NEW_ORDER, idempotency: claim('replay-me') }))
    const start = await head(store)
    const expected = { outcome: 'replayed', orderId: first.id, status: 201, body: orderJson(first) }
    assert.deepEqual(await store.orders.place({ order: NEW_ORDER, idempotency: claim('replay-me') }), expected)
    // The order changes; the replay is still the first response.
    assert.equal((await store.orders.ship(first.id)).outcome, 'shipped')
    await store.close()
    const reopened = await open(database)
    assert.deepEqual(await reopened.orders.place({ order: NEW_ORDER, idempotency: claim('replay-me') }), expected)
    assert.equal(await orderCount(database), 1)
    assert.deepEqual(
      (await eventsAfter(reopened, start)).events.map((event) => event.type),
      ['order.shipped'],
    )
  })

  it('key_reused for the key with another body; the key is scoped to its API key', async () => {
    const { database, store } = await fresh()
    const first = placed(await store.orders.place({ order: NEW_ORDER, idempotency: claim('k') }))
    const other = claim('k', { fingerprint: 'b'.repeat(64) })
    assert.deepEqual(await store.orders.place({ order: { ...NEW_ORDER, quantity: 3 }, idempotency: other }), { outcome: 'key_reused' })
    assert.equal(await orderCount(database), 1)
    const elsewhere = placed(await store.orders.place({ order: NEW_ORDER, idempotency: claim('k', { apiKeyId: 2n }) }))
    assert.notEqual(elsewhere.id, first.id)
    assert.deepEqual(await store.orders.place({ order: NEW_ORDER, idempotency: claim('k', { apiKeyId: 2n }) }), {
      outcome: 'replayed',
      orderId: elsewhere.id,
      status: 201,
      body: orderJson(elsewhere),
    })
  })

  it('of concurrent places with one key, exactly one order is placed: the others are key_in_use, or replay it', async () => {
    const { database, store } = await fresh()
    const results = await Promise.all(Array.from({ length: 10 }, () => store.orders.place({ order: NEW_ORDER, idempotency: claim('once') })))
    const winners = results.filter((result) => result.outcome === 'placed')
    assert.equal(winners.length, 1)
    const id = placed(winners[0]!).id
    for (const result of results) {
      if (result.outcome === 'replayed') assert.equal(result.orderId, id)
      else if (result.outcome !== 'placed') assert.equal(result.outcome, 'key_in_use')
    }
    assert.ok(results.some((result) => result.outcome === 'key_in_use'), 'a request while the first is in flight is key_in_use')
    assert.equal(await orderCount(database), 1)
    // Settled: the key is free of its in-flight mark, and replays.
    assert.equal((await store.orders.place({ order: NEW_ORDER, idempotency: claim('once') })).outcome, 'replayed')
  })

  it('of concurrent places with one key on two store instances of one database, exactly one order is placed', async () => {
    const { database, store } = await fresh()
    const second = await open(database)
    const request: PlaceRequest = { order: NEW_ORDER, idempotency: claim('two-instances') }
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? store : second).orders.place(request)))
    const winners = results.filter((result) => result.outcome === 'placed')
    assert.equal(winners.length, 1)
    const id = placed(winners[0]!).id
    for (const result of results) {
      if (result.outcome === 'replayed') assert.equal(result.orderId, id)
      else if (result.outcome !== 'placed') assert.equal(result.outcome, 'key_in_use')
    }
    assert.equal(await orderCount(database), 1)
  })

  it('an expired key places again (whatever the body), and its record is replaced', async () => {
    const { database, store } = await fresh()
    const expired = { expiresAt: new Date(Date.now() - 1000) }
    const first = placed(await store.orders.place({ order: NEW_ORDER, idempotency: claim('old', expired) }))
    const again = placed(await store.orders.place({ order: NEW_ORDER, idempotency: claim('old', expired) }))
    const third = placed(await store.orders.place({ order: NEW_ORDER, idempotency: claim('old', { fingerprint: 'c'.repeat(64) }) }))
    assert.ok(first.id < again.id && again.id < third.id)
    assert.deepEqual(await store.orders.place({ order: NEW_ORDER, idempotency: claim('old', { fingerprint: 'c'.repeat(64) }) }), {
      outcome: 'replayed',
      orderId: third.id,
      status: 201,
      body: orderJson(third),
    })
    assert.equal(await orderCount(database), 3)
  })

  it('pruneIdempotencyKeys deletes only records expired before now, at most limit of them', async () => {
    const { store } = await fresh()
    const now = Date.now()
    for (const key of ['e1', 'e2', 'e3']) await store.orders.place({ order: NEW_ORDER, idempotency: claim(key, { expiresAt: new Date(now - HOUR) }) })
    const kept = placed(await store.orders.place({ order: NEW_ORDER, idempotency: claim('kept', { expiresAt: new Date(now + HOUR) }) }))
    assert.equal(await store.orders.pruneIdempotencyKeys(new Date(now), 2), 2)
    assert.equal(await store.orders.pruneIdempotencyKeys(new Date(now), 2), 1)
    assert.equal(await store.orders.pruneIdempotencyKeys(new Date(now), 2), 0)
    const replay = await store.orders.place({ order: NEW_ORDER, idempotency: claim('kept', { expiresAt: new Date(now + HOUR) }) })
    assert.deepEqual(replay, { outcome: 'replayed', orderId: kept.id, status: 201, body: orderJson(kept) })
    // Judged against the `now` given: two hours on, the kept record has expired too.
    assert.equal(await store.orders.pruneIdempotencyKeys(new Date(now + 2 * HOUR), 100), 1)
    assert.equal((await store.orders.place({ order: NEW_ORDER, idempotency: claim('kept') })).outcome, 'placed')
  })

  it('ship and complete: their outcomes, shippedAt and completedAt set once and unchanged by a retry, their events in order', async () => {
    const { store } = await fresh()
    await store.orders.import(from([imported(TWO_53 + 1n), imported(2n, { status: 'cancelled' }), imported(3n)]))
    const id = TWO_53 + 1n
    const start = await head(store)
    const version = await store.orders.dataVersion()

    assert.deepEqual(await store.orders.complete(id), { outcome: 'not_shipped' })
    const before = new Date().toISOString()
    const shipped = await store.orders.ship(id)
    assert.equal(shipped.outcome, 'shipped')
    const shippedOrder = (shipped as { order: OrderV2Record }).order
    assert.match(shippedOrder.shippedAt ?? '', ISO_MS)
    assert.ok(shippedOrder.shippedAt! >= before && shippedOrder.shippedAt! <= new Date().toISOString())
    assert.equal(shippedOrder.status, 'shipped')
    assert.equal(shippedOrder.completedAt, null)
    assert.deepEqual(await store.orders.ship(id), { outcome: 'already_shipped', order: shippedOrder })
    assert.equal((await store.orders.cancel(id, null)).outcome, 'already_shipped')

    const completed = await store.orders.complete(id)
    assert.equal(completed.outcome, 'completed')
    const completeOrder = (completed as { order: OrderV2Record }).order
    assert.equal(completeOrder.complete, true)
    assert.equal(completeOrder.shippedAt, shippedOrder.shippedAt)
    assert.match(completeOrder.completedAt ?? '', ISO_MS)
    assert.ok(completeOrder.completedAt! >= shippedOrder.shippedAt!)
    assert.deepEqual(await store.orders.complete(id), { outcome: 'already_complete', order: completeOrder })
    assert.deepEqual(await store.orders.ship(id), { outcome: 'already_shipped', order: completeOrder })
    assert.deepEqual(await store.orders.find(id), completeOrder)

    assert.deepEqual(await store.orders.ship(2n), { outcome: 'cancelled' })
    assert.deepEqual(await store.orders.complete(2n), { outcome: 'cancelled' })
    assert.deepEqual(await store.orders.ship(4n), { outcome: 'not_found' })
    assert.deepEqual(await store.orders.complete(4n), { outcome: 'not_found' })
    assert.deepEqual(await store.orders.complete(3n), { outcome: 'not_shipped' })

    const { events } = await eventsAfter(store, start)
    assert.deepEqual(
      events.map((event) => [event.type, event.orderId, event.orderJson]),
      [
        ['order.shipped', id, orderJson(shippedOrder)],
        ['order.completed', id, orderJson(completeOrder)],
      ],
    )
    assert.equal(events[0]!.occurredAt, shippedOrder.shippedAt)
    assert.equal(events[1]!.occurredAt, completeOrder.completedAt)
    assert.match(events[1]!.orderJson, /"shippedAt":"[^"]+","completedAt":"[^"]+"}$/)
    assert.equal(await store.orders.dataVersion(), version + 2n, 'bumped by the two changes only')
  })

  it('a cancel and a ship racing on one pending order, from two store instances: exactly one wins, one event', async () => {
    const { database, store } = await fresh()
    const second = await open(database)
    const ids = Array.from({ length: 20 }, (_, i) => 100n + BigInt(i))
    await store.orders.import(from(ids.map((id) => imported(id))))
    const start = await head(store)
    const races = await Promise.all(
      ids.map((id, i) => {
        // Each side on either instance, and either first, across the orders.
        const [canceller, shipper] = i % 2 === 0 ? [store, second] : [second, store]
        if (i % 4 < 2) {
          const cancel = canceller.orders.cancel(id, null)
          return Promise.all([cancel, shipper.orders.ship(id)])
        }
        const ship = shipper.orders.ship(id)
        return Promise.all([canceller.orders.cancel(id, null), ship])
      }),
    )
    const { events } = await eventsAfter(store, start)
    for (const [i, [cancel, ship]] of races.entries()) {
      const id = ids[i]!
      const cancelWon = cancel.outcome === 'cancelled'
      const shipWon = ship.outcome === 'shipped'
      assert.ok(cancelWon !== shipWon, `order ${id}: cancel ${cancel.outcome}, ship ${ship.outcome}`)
      assert.equal(cancel.outcome, cancelWon ? 'cancelled' : 'already_shipped')
      assert.equal(ship.outcome, shipWon ? 'shipped' : 'cancelled')
      assert.equal((await store.orders.find(id))?.status, cancelWon ? 'cancelled' : 'shipped')
      assert.deepEqual(
        events.filter((event) => event.orderId === id).map((event) => event.type),
        [cancelWon ? 'order.cancelled' : 'order.shipped'],
      )
    }
  })

  it('an import neither sets nor clears shippedAt and completedAt', async () => {
    const { store } = await fresh()
    await store.orders.import(from([imported(1n), imported(2n)]))
    await store.orders.ship(1n)
    const completed = (await store.orders.complete(1n)) as { order: OrderV2Record }
    // Re-imported with another quantity (an update of the row), and a new order imported shipped and complete.
    await store.orders.import(from([imported(1n, { status: 'shipped', complete: true, quantity: 5 }), imported(3n, { status: 'shipped', complete: true })]))
    await store.orders.import(from([imported(2n, { status: 'shipped' })]))
    const one = await store.orders.find(1n)
    assert.equal(one?.quantity, 5, 'the import did update the order')
    assert.equal(one?.shippedAt, completed.order.shippedAt)
    assert.equal(one?.completedAt, completed.order.completedAt)
    assert.ok(one?.shippedAt !== null && one?.completedAt !== null)
    for (const id of [2n, 3n]) {
      const order = await store.orders.find(id)
      assert.equal(order?.status, 'shipped')
      assert.equal(order?.shippedAt, null, `order ${id}`)
      assert.equal(order?.completedAt, null, `order ${id}`)
    }
    // Completed through the store, the imported shipped order gets completedAt, still no shippedAt.
    const two = (await store.orders.complete(2n)) as { order: OrderV2Record }
    assert.equal(two.order.shippedAt, null)
    assert.match(two.order.completedAt ?? '', ISO_MS)
  })

  if (kind === 'sqlite') {
    it('migration 4 rebuilds order_events with every row at its position, and never hands out a position twice', async () => {
      const database = await createDatabase('sqlite')
      databases.push(database)
      const path = (database.config as { path: string }).path
      const db = new Database(path)
      db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)')
      for (const migration of SQLITE_MIGRATIONS.filter((m) => m.version <= 3)) {
        db.exec(migration.sql)
        db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(migration.version, migration.name, new Date().toISOString())
      }
      const insert = db.prepare(`INSERT INTO order_events (occurred_at, order_id, type, body) VALUES ('2026-01-01T00:00:00.000Z', ?, 'order.created', ?)`)
      for (let i = 1; i <= 6; i++) insert.run(i, `"b${i}"`)
      // Retention deleted the oldest and the newest events: the counter is past every row left.
      db.exec('DELETE FROM order_events WHERE position IN (1, 5, 6)')
      const columns = 'position, occurred_at, order_id, type, body' // migration 3's; later ones add columns
      const rowsBefore = db.prepare(`SELECT ${columns} FROM order_events ORDER BY position`).all()
      db.close()

      const store = await open(database)
      assert.deepEqual(await store.migrate(), SQLITE_MIGRATIONS.filter((m) => m.version >= 4).map((m) => m.version))
      const check = new Database(path)
      try {
        assert.deepEqual(check.prepare(`SELECT ${columns} FROM order_events ORDER BY position`).all(), rowsBefore)
        assert.deepEqual(check.prepare('SELECT DISTINCT traceparent, tracestate FROM order_events').all(), [{ traceparent: null, tracestate: null }])
        assert.deepEqual(check.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'order_events'`).all(), [{ seq: 6 }])
        assert.deepEqual(check.prepare(`SELECT name FROM sqlite_master WHERE name LIKE 'order_events%'`).all(), [{ name: 'order_events' }])
      } finally {
        check.close()
      }
      await store.orders.import(from([imported(1n)]))
      assert.equal(await orderCount(database), 1)
      const completedOk = await store.orders.ship(1n).then(() => store.orders.complete(1n))
      assert.equal(completedOk.outcome, 'completed')
      const { events } = await eventsAfter(store, 4n)
      assert.deepEqual(
        events.map((event) => [event.position, event.type]),
        [
          [7n, 'order.created'],
          [8n, 'order.shipped'],
          [9n, 'order.completed'],
        ],
      )
    })
  }
})
