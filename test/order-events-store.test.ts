import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import fastJson from 'fast-json-stringify'
import type { OrderRecord } from '../src/domain/orders.js'
import { OrderV2, toApiOrderV2 } from '../src/schemas/order-v2.js'
import { EventsExpiredError, UnknownEventPositionError } from '../src/domain/order-events.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, forEachStore, type TestDatabaseHandle } from './support/harness.js'
import { connectSql, type Sql } from './support/sql.js'

// The outbox on both stores: every change writes its event in its own transaction, and the feed
// reads them back in commit order, exactly once, with the retention rules.

const serializeOrder = fastJson(OrderV2 as object, {}) as (order: unknown) => string

interface FeedEvent {
  id: string
  type: string
  occurredAt: string
  order: { id: number | string; status: string; cancelledAt?: string; [field: string]: unknown }
}

function order(id: bigint, fields: Partial<OrderRecord> = {}): OrderRecord {
  return { id, petId: 7n, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z', complete: false, status: 'pending', ...fields }
}

async function* from<T>(items: Iterable<T>): AsyncIterable<T> {
  yield* items
}

/** Every event after `after`, read in pages of `limit`, and where to resume. */
async function drain(store: Store, after?: bigint, limit = 1000): Promise<{ events: FeedEvent[]; raw: string[]; next: bigint }> {
  const events: FeedEvent[] = []
  const raw: string[] = []
  let cursor = after
  for (;;) {
    const page = await store.events.read(cursor, limit)
    const text = page.json.toString()
    raw.push(text)
    events.push(...(JSON.parse(text) as FeedEvent[]))
    assert.equal(JSON.parse(text).length, page.count)
    cursor = page.next
    if (page.count < limit) return { events, raw, next: page.next }
  }
}

/** The bytes of one event's order, as the page holds them (ids as exact literals). */
function orderBytes(pageJson: string, eventId: string): string {
  const start = pageJson.indexOf(`{"id":"${eventId}",`)
  assert.ok(start >= 0, `event ${eventId} is in the page`)
  const from = pageJson.indexOf('"order":', start) + '"order":'.length
  return pageJson.slice(from, pageJson.indexOf('}', from) + 1)
}


forEachStore('order events: the outbox', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let sql: Sql

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    sql = await connectSql(database)
  })

  after(async () => {
    await store?.close()
    await sql?.close()
    await database?.dispose()
  })

  it('starts empty: from the start, no events and a cursor that resumes from the beginning', async () => {
    const page = await store.events.read(undefined, 100)
    assert.equal(page.json.toString(), '[]')
    assert.equal(page.count, 0)
    assert.equal(page.next, 0n)
    assert.deepEqual(JSON.parse((await store.events.read(0n, 100)).json.toString()), [])
  })

  it('records order.created per new order, order.updated only for a real change, nothing for an unchanged re-import', async () => {
    const start = (await drain(store)).next
    await store.orders.import(from([order(1n), order(2n), order(2n ** 63n - 1n, { petId: 2n ** 53n + 1n })]))
    const created = await drain(store, start)
    assert.deepEqual(
      created.events.map((e) => e.type),
      ['order.created', 'order.created', 'order.created'],
    )
    // int64 exact in the bytes: the order as the v2 serializer writes what find() returns.
    for (const [i, id] of [1n, 2n, 2n ** 63n - 1n].entries()) {
      const found = await store.orders.find(id)
      assert.equal(orderBytes(created.raw.join(''), created.events[i]!.id), serializeOrder(toApiOrderV2(found!)))
    }
    assert.match(created.raw.join(''), /"petId":9007199254740993/)

    const version = await store.orders.dataVersion()
    await store.orders.import(from([order(1n), order(2n)]))
    assert.deepEqual((await drain(store, created.next)).events, [], 'an unchanged re-import records nothing')
    assert.equal(await store.orders.dataVersion(), version, 'and changes nothing')

    await store.orders.import(from([order(1n), order(2n, { quantity: 5 })]))
    const updated = await drain(store, created.next)
    assert.deepEqual(
      updated.events.map((e) => [e.type, e.order.id, e.order.quantity]),
      [['order.updated', 2, 5]],
    )
  })

  it("an imported order's event holds the order exactly as v2 writes it, whatever fields it has", async () => {
    const start = (await drain(store)).next
    const records = [
      order(30n, { petId: null, quantity: null, shipDate: null }),
      order(31n, { status: 'shipped', complete: true, shipDate: '0099-01-02T03:04:05.006Z' }),
      order(32n, { status: 'cancelled', cancelledAt: '2026-11-20T08:15:00.123Z', cancellationReason: 'out_of_stock' }),
      order(33n, { status: 'cancelled', petId: 2n ** 63n - 2n, quantity: 2147483647 }),
    ]
    await store.orders.import(from(records))
    const created = await drain(store, start)
    assert.deepEqual(created.events.map((e) => e.type), records.map(() => 'order.created'))
    for (const [i, { id }] of records.entries()) {
      const found = await store.orders.find(id)
      assert.equal(orderBytes(created.raw.join(''), created.events[i]!.id), serializeOrder(toApiOrderV2(found!)), `order ${id}`)
    }
  })

  it('records order.shipped and order.cancelled, once per order actually changed; cancelledAt is the event time', async () => {
    await store.orders.import(from([order(10n), order(11n), order(12n)]))
    const start = (await drain(store)).next
    assert.equal((await store.orders.ship(10n)).outcome, 'shipped')
    assert.equal((await store.orders.ship(10n)).outcome, 'already_shipped')
    assert.equal((await store.orders.cancel(11n, null, 'out_of_stock')).outcome, 'cancelled')
    assert.equal((await store.orders.cancel(11n, null)).outcome, 'already_cancelled')
    assert.equal((await store.orders.cancel(10n, null)).outcome, 'already_shipped')
    const results = await Promise.all(Array.from({ length: 50 }, () => store.orders.cancel(12n, null)))
    assert.equal(results.filter((r) => r.outcome === 'cancelled').length, 1)
    const { events } = await drain(store, start)
    assert.deepEqual(
      events.map((e) => [e.type, e.order.id, e.order.status]),
      [
        ['order.shipped', 10, 'shipped'],
        ['order.cancelled', 11, 'cancelled'],
        ['order.cancelled', 12, 'cancelled'],
      ],
    )
    assert.equal(events[1]!.order.cancellationReason, 'out_of_stock')
    for (const event of events.slice(1)) assert.equal(event.order.cancelledAt, event.occurredAt)
    assert.match(events[0]!.occurredAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  })

  it('gives positions in ascending order, pages by limit, and resumes exactly after a cursor', async () => {
    const ids = Array.from({ length: 25 }, (_, i) => 100n + BigInt(i))
    await store.orders.import(from(ids.map((id) => order(id))))
    const all = await drain(store)
    const positions = all.events.map((e) => BigInt(e.id))
    assert.deepEqual(positions, [...positions].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)))
    assert.equal(new Set(positions).size, positions.length)
    const paged = await drain(store, undefined, 7)
    assert.deepEqual(paged.events, all.events, 'pages of 7 give the same events')
    const middle = all.events[4]!
    assert.deepEqual((await drain(store, BigInt(middle.id))).events, all.events.slice(5), "an event's id is a cursor")
    const tail = await store.events.read(all.next, 10)
    assert.equal(tail.count, 0)
    assert.equal(tail.next, all.next, 'an empty page resumes where it was asked')
    await assert.rejects(store.events.read(all.next + 1000n, 10), UnknownEventPositionError)
  })

  it('writes no event for a cancel batch that fails, nor for an import that fails midway', async () => {
    await store.orders.import(from([order(200n), order(201n)]))
    const start = (await drain(store)).next
    if (kind === 'sqlite') {
      await sql.query(`CREATE TRIGGER refuse_201 BEFORE UPDATE ON orders WHEN NEW.id = 201 BEGIN SELECT RAISE(ABORT, 'refused 201'); END`)
    } else {
      await sql.query(`CREATE FUNCTION refuse_201() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN IF NEW.id = 201 THEN RAISE EXCEPTION 'refused 201'; END IF; RETURN NEW; END $$`)
      await sql.query('CREATE TRIGGER refuse_201 BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION refuse_201()')
    }
    try {
      const results = await Promise.allSettled([store.orders.cancel(200n, null), store.orders.cancel(201n, null)])
      assert.deepEqual(
        results.map((r) => r.status),
        ['rejected', 'rejected'],
      )
    } finally {
      await sql.query(kind === 'sqlite' ? 'DROP TRIGGER refuse_201' : 'DROP TRIGGER refuse_201 ON orders')
      if (kind === 'postgres') await sql.query('DROP FUNCTION refuse_201()')
    }
    async function* failing(): AsyncIterable<OrderRecord> {
      for (let i = 0; i < 12_000; i++) yield order(50_000n + BigInt(i))
      throw new Error('read error')
    }
    await assert.rejects(store.orders.import(failing()), /read error/)
    assert.deepEqual((await drain(store, start)).events, [])
    assert.equal((await store.orders.cancel(200n, null)).outcome, 'cancelled')
    assert.deepEqual(
      (await drain(store, start)).events.map((e) => [e.type, e.order.id]),
      [['order.cancelled', 200]],
    )
  })

  it('prunes the oldest events in batches, never past one it keeps; a cursor before them is expired', async () => {
    const head = (await drain(store)).next
    const [{ n }] = (await sql.query<{ n: unknown }>('SELECT count(*) AS n FROM order_events')) as [{ n: unknown }]
    const total = Number(n)
    assert.ok(total > 30)
    // Make the 10 newest events recent and everything older old, then one old event after them.
    await sql.query(
      kind === 'sqlite'
        ? `UPDATE order_events SET occurred_at = '2000-01-01T00:00:00.000Z'`
        : `UPDATE order_events SET occurred_at = '2000-01-01T00:00:00Z'`,
    )
    const keptFrom = (await drain(store)).events.at(-10)!.id
    await sql.query(
      kind === 'sqlite'
        ? `UPDATE order_events SET occurred_at = '2999-01-01T00:00:00.000Z' WHERE position = ${keptFrom}`
        : `UPDATE order_events SET occurred_at = '2999-01-01T00:00:00Z' WHERE position = ${keptFrom}`,
    )
    const cutoff = new Date('2026-01-01T00:00:00Z')
    assert.equal(await store.events.prune(cutoff, 7), 7)
    let deleted = 7
    for (let n = await store.events.prune(cutoff, 7); n > 0; n = await store.events.prune(cutoff, 7)) deleted += n
    assert.equal(deleted, total - 10, 'everything before the first kept event, and nothing after it')
    const kept = await drain(store)
    assert.equal(kept.events.length, 10)
    assert.equal(kept.events[0]!.id, keptFrom)
    assert.equal(kept.next, head)
    const [{ p }] = (await sql.query<{ p: unknown }>('SELECT pruned_through AS p FROM event_retention')) as [{ p: unknown }]
    const prunedThrough = BigInt(String(p))
    assert.ok(prunedThrough < BigInt(keptFrom))
    await assert.rejects(store.events.read(0n, 10), (error) => error instanceof EventsExpiredError)
    await assert.rejects(store.events.read(prunedThrough - 1n, 10), EventsExpiredError)
    // The newest deleted position is still a valid place to resume.
    const resumed = await store.events.read(prunedThrough, 100)
    assert.equal(resumed.count, 10)
  })
})

forEachStore('order events: no gap when a transaction commits late', (kind) => {
  let database: TestDatabaseHandle
  let first: Store
  let second: Store
  let sql: Sql

  before(async () => {
    database = await createDatabase(kind)
    first = await openStore(database.config)
    await first.migrate()
    second = await openStore(database.config) // a second instance on the same database
    sql = await connectSql(database)
  })

  after(async () => {
    await first?.close()
    await second?.close()
    await sql?.close()
    await database?.dispose()
  })

  it('a consumer following the feed gets an event whose commit is delayed exactly once, before the later ones', async (t) => {
    if (kind === 'sqlite') {
      t.skip('SQLite runs one write transaction at a time: a later commit cannot overtake an earlier one')
      return
    }
    await first.orders.import(from([order(300n), order(301n), order(302n)]))
    let cursor = (await drain(first)).next
    // The cancel of order 300 takes its event's position, then spends 1.5 s in COMMIT (a deferred
    // trigger runs at COMMIT): the late committer that a reader of "everything after the last
    // position I saw" would skip, had a later position committed meanwhile.
    await sql.query(`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$`)
    await sql.query(`CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON order_events DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW WHEN (NEW.order_id = 300) EXECUTE FUNCTION slow_commit()`)
    try {
      const settled: string[] = []
      const late = first.orders.cancel(300n, null).then((r) => settled.push(`300 ${r.outcome}`))
      await new Promise((resolve) => setTimeout(resolve, 300))
      const later = Promise.all([second.orders.cancel(301n, null), second.orders.ship(302n)]).then(() => settled.push('301, 302'))
      // The consumer reads all along, resuming from each cursor.
      const seen: FeedEvent[] = []
      const deadline = Date.now() + 10_000
      while (seen.length < 3 && Date.now() < deadline) {
        const page = await second.events.read(cursor, 100)
        seen.push(...(JSON.parse(page.json.toString()) as FeedEvent[]))
        cursor = page.next
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await Promise.all([late, later])
      assert.deepEqual(settled, ['300 cancelled', '301, 302'], 'the later transactions commit after the late one')
      // 301 and 302 commit concurrently, in either order, both after 300.
      const names = seen.map((e) => `${e.type} ${e.order.id}`)
      assert.equal(names[0], 'order.cancelled 300')
      assert.deepEqual(names.slice(1).sort(), ['order.cancelled 301', 'order.shipped 302'])
      assert.equal((await second.events.read(cursor, 100)).count, 0, 'and nothing twice')
    } finally {
      await sql.query('DROP TRIGGER slow_commit ON order_events')
      await sql.query('DROP FUNCTION slow_commit()')
    }
  })
})
