import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises'
import fastJson from 'fast-json-stringify'
import pg from 'pg'
import { INT64_MAX } from '../src/domain/int64.js'
import type { IdempotencyClaim, NewOrder, OrderRecord, PlaceResult } from '../src/domain/orders.js'
import { OrderV2, toApiOrderV2 } from '../src/schemas/order-v2.js'
import { PostgresStore } from '../src/store/postgres/postgres-store.js'
import { order, records, within } from './support/harness.js'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './support/postgres.js'

const skip = await postgresSkipReason()

// What the placeOrder route answers with: the Order as the OrderV2 serializer writes it.
const serializeOrder = fastJson(OrderV2 as object, {}) as (order: unknown) => string

const HOUR = 3_600_000
const NEW_ORDER: NewOrder = { petId: 7n, quantity: 2, shipDate: '2026-12-01T10:00:00.000Z' }

function claim(key: string, fingerprint = 'a'.repeat(64), expiresAt = new Date(Date.now() + HOUR)): IdempotencyClaim {
  return { apiKeyId: 1n, key, fingerprint, expiresAt }
}

/** What the place answered: the order's id and JSON, or the replayed ones. */
function placedJson(result: PlaceResult): { id: bigint; json: string } {
  if (result.outcome === 'placed') return { id: result.order.id, json: serializeOrder(toApiOrderV2(result.order)) }
  if (result.outcome === 'replayed') return { id: result.orderId, json: result.body }
  assert.fail(`expected placed or replayed, got ${result.outcome}`)
}

/**
 * Two store instances on one database, as two servers behind a load balancer, and a connection of
 * the test's own.
 */
describe('PostgreSQL writes over several instances', { skip }, () => {
  let db: TestDatabase
  let first: PostgresStore
  let second: PostgresStore
  let admin: pg.Client

  async function open(): Promise<PostgresStore> {
    const store = new PostgresStore(db.url)
    await store.migrate()
    return store
  }

  async function count(sql: string, params: unknown[] = []): Promise<number> {
    return (await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${sql}) AS rows`, params)).rows[0]!.n
  }

  before(async () => {
    db = await createTestDatabase()
    first = await open()
    second = await open()
    admin = new pg.Client({ connectionString: db.url })
    await admin.connect()
  })

  after(async () => {
    await admin?.end()
    await first?.close()
    await second?.close()
    await db?.drop()
  })

  it('places exactly one order for 24 concurrent places with one key over two instances; the others are key_in_use or replayed', async () => {
    for (let round = 0; round < 5; round++) {
      const key = `one-key-${round}`
      const ordersBefore = await count('SELECT 1 FROM orders')
      // Spread over a few turns of the event loop: some join a batch in flight, some come after it committed.
      const results = await Promise.all(
        Array.from({ length: 24 }, async (_, i) => {
          for (let turn = 0; turn < i % 4; turn++) await nextTurn()
          return (i % 2 === 0 ? first : second).orders.place({ order: NEW_ORDER, idempotency: claim(key) })
        }),
      )
      const placed = results.filter((r) => r.outcome === 'placed')
      assert.equal(placed.length, 1, `round ${round}: ${results.map((r) => r.outcome).join(', ')}`)
      const { id, json } = placedJson(placed[0]!)
      for (const result of results) {
        assert.ok(['placed', 'replayed', 'key_in_use'].includes(result.outcome), result.outcome)
        if (result.outcome === 'replayed') {
          assert.deepEqual(placedJson(result), { id, json })
          assert.equal(result.status, 201)
        }
      }
      assert.equal(await count('SELECT 1 FROM orders'), ordersBefore + 1)
      assert.equal(await count(`SELECT 1 FROM order_events WHERE order_id = $1 AND type = 'order.created'`, [id.toString()]), 1)
      assert.equal(await count('SELECT 1 FROM idempotency_keys WHERE key = $1 AND order_id = $2', [key, id.toString()]), 1)
      // Once it has committed, every instance replays it.
      for (const store of [first, second]) assert.deepEqual(placedJson(await store.orders.place({ order: NEW_ORDER, idempotency: claim(key) })), { id, json })
    }
  })

  it('answers key_in_use at once for a key whose place is in flight on another instance, then replays it', async () => {
    const key = 'in-flight'
    // Another writer holds data_version's lock: the first instance's place takes its key, then waits.
    await admin.query('BEGIN')
    await admin.query('SELECT version FROM data_version WHERE id = 1 FOR UPDATE')
    let firstSettled = false
    const placing = first.orders.place({ order: NEW_ORDER, idempotency: claim(key) }).finally(() => (firstSettled = true))
    try {
      // This database's advisory locks only: another test file's store (a migration, a lease) may hold one in its own.
      await within(10_000, 'the first place waits for data_version holding its key', async () => {
        const held = `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
        return (await count(held)) === 1
      })
      assert.deepEqual(await second.orders.place({ order: NEW_ORDER, idempotency: claim(key) }), { outcome: 'key_in_use' })
      assert.equal(firstSettled, false)
    } finally {
      await admin.query('COMMIT')
    }
    const placed = await placing
    assert.equal(placed.outcome, 'placed')
    const again = await second.orders.place({ order: NEW_ORDER, idempotency: claim(key) })
    assert.deepEqual(placedJson(again), placedJson(placed))
    assert.deepEqual(await second.orders.place({ order: NEW_ORDER, idempotency: claim(key, 'b'.repeat(64)) }), { outcome: 'key_reused' })
  })

  it('gives concurrent places on two instances distinct ids, consecutive above the imported max, never reused after reopening', async () => {
    const importedMax = 2n ** 53n + 1000n
    await first.orders.import(records([order({ id: -5n }), order({ id: importedMax, status: 'cancelled' }), order({ id: 17n })]))
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? first : second).orders.place({ order: NEW_ORDER })))
    const ids = results.map((r) => placedJson(r).id).sort((a, b) => (a < b ? -1 : 1))
    assert.deepEqual(ids, Array.from({ length: 200 }, (_, i) => importedMax + 1n + BigInt(i)))
    // The stored rows are the ones placed, exact past 2^53.
    const { rows } = await admin.query<{ id: string }>('SELECT id::text FROM orders WHERE id > $1 ORDER BY id', [importedMax.toString()])
    assert.deepEqual(rows.map((r) => BigInt(r.id)), ids)

    await first.close()
    first = await open()
    const next = await first.orders.place({ order: NEW_ORDER })
    assert.equal(placedJson(next).id, ids.at(-1)! + 1n)
  })

  it('places above every id of an import that commits while they run, and leaves its orders as imported', async () => {
    const top = BigInt((await admin.query<{ max: string }>('SELECT coalesce(max(id), 0)::text AS max FROM orders')).rows[0]!.max)
    const imported = Array.from({ length: 12_000 }, (_, i) => order({ id: top + 1n + BigInt(i), petId: 555n, quantity: 3 }))
    let openGate!: () => void
    const gate = new Promise<void>((resolve) => (openGate = resolve))
    let atGate = false
    async function* held(): AsyncIterable<OrderRecord> {
      yield* imported.slice(0, 5000) // one batch written, not committed: the ids the places would take
      atGate = true
      await gate
      yield* imported.slice(5000)
    }
    const importer = await open()
    try {
      const importing = importer.orders.import(held())
      // The first batch is sent once the input is at the gate, and written once the importer is idle
      // again with that INSERT as its last statement (idle right after BEGIN is not enough).
      await within(30_000, 'the import has written its first batch', async () => {
        if (!atGate) return false
        const sql = `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction' AND query LIKE 'WITH written AS (INSERT INTO orders%'`
        return (await count(sql)) === 1
      })
      let settled = 0
      const placing = Promise.all(
        Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? first : second).orders.place({ order: { ...NEW_ORDER, petId: 9n } }).finally(() => settled++)),
      )
      await sleep(300) // The places run into the import's rows meanwhile, and cannot settle before it commits.
      assert.equal(settled, 0)
      openGate()
      assert.equal(await importing, imported.length)
      const ids = (await placing).map((r) => placedJson(r).id).sort((a, b) => (a < b ? -1 : 1))
      const importedTop = top + BigInt(imported.length)
      assert.deepEqual(ids, Array.from({ length: 40 }, (_, i) => importedTop + 1n + BigInt(i)))
      assert.equal(await count('SELECT 1 FROM orders WHERE id > $1 AND id <= $2 AND pet_id = 555', [top.toString(), importedTop.toString()]), imported.length)
      assert.equal(await count('SELECT 1 FROM orders WHERE id > $1 AND pet_id = 9', [importedTop.toString()]), 40)
      assert.equal(await count(`SELECT 1 FROM order_events WHERE order_id > $1 AND type = 'order.created'`, [importedTop.toString()]), 40)
    } finally {
      openGate()
      await importer.close()
    }
  })

  it('lets exactly one of a cancel and a ship racing on one pending order over two instances win, round after round', async () => {
    const base = 8_000_000_000_000_000_000n
    const rounds = 60
    await first.orders.import(records(Array.from({ length: rounds }, (_, i) => order({ id: base + BigInt(i) }))))
    for (let i = 0; i < rounds; i++) {
      const id = base + BigInt(i)
      const [canceller, shipper] = i % 2 === 0 ? [first, second] : [second, first]
      const [cancel, ship] = await Promise.all([canceller.orders.cancel(id, null), shipper.orders.ship(id)])
      const cancelled = cancel.outcome === 'cancelled'
      assert.notEqual(cancelled, ship.outcome === 'shipped', `order ${id}: ${cancel.outcome} and ${ship.outcome}`)
      assert.equal(cancelled ? ship.outcome : cancel.outcome, cancelled ? 'cancelled' : 'already_shipped')
      const { rows } = await admin.query<{ status: string; type: string }>(
        `SELECT o.status, e.type FROM orders o JOIN order_events e ON e.order_id = o.id WHERE o.id = $1 AND e.type <> 'order.created'`,
        [id.toString()],
      )
      assert.deepEqual(rows, [cancelled ? { status: 'cancelled', type: 'order.cancelled' } : { status: 'shipped', type: 'order.shipped' }])
    }
  })

  it('ships and completes an order once when the same request comes many times at once on both instances; the others answer it as it stands', async () => {
    const id = 7_000_000_000_000_000_001n
    await first.orders.import(records([order({ id })]))
    const ships = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? first : second).orders.ship(id)))
    assert.equal(ships.filter((r) => r.outcome === 'shipped').length, 1, ships.map((r) => r.outcome).join(', '))
    const shippedAt = new Set(ships.map((r) => (r.outcome === 'shipped' || r.outcome === 'already_shipped' ? r.order.shippedAt : r.outcome)))
    assert.equal(shippedAt.size, 1)
    assert.match([...shippedAt][0]!, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    const completes = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? second : first).orders.complete(id)))
    assert.equal(completes.filter((r) => r.outcome === 'completed').length, 1, completes.map((r) => r.outcome).join(', '))
    for (const result of completes) {
      assert.ok(result.outcome === 'completed' || result.outcome === 'already_complete', result.outcome)
      assert.equal(result.order.complete, true)
      assert.equal(result.order.shippedAt, [...shippedAt][0])
    }
    assert.equal(new Set(completes.map((r) => (r.outcome === 'completed' || r.outcome === 'already_complete') && r.order.completedAt)).size, 1)
    const { rows } = await admin.query<{ type: string }>(`SELECT type FROM order_events WHERE order_id = $1 ORDER BY position`, [id.toString()])
    assert.deepEqual(rows.map((r) => r.type), ['order.created', 'order.shipped', 'order.completed'])
  })

  it('gives the ids up to 9223372036854775807 exactly, then ids_exhausted with nothing written', async () => {
    await first.orders.import(records([order({ id: INT64_MAX - 2n })]))
    // One batch: two ids are left for three places.
    const results = await Promise.all([0, 1, 2].map(() => first.orders.place({ order: NEW_ORDER })))
    assert.deepEqual(results.filter((r) => r.outcome === 'placed').map((r) => placedJson(r).id), [INT64_MAX - 1n, INT64_MAX])
    assert.deepEqual(results.filter((r) => r.outcome !== 'placed'), [{ outcome: 'ids_exhausted' }])
    assert.equal(placedJson(results[1]!).json, `{"id":9223372036854775807,"complete":false,"status":"pending","version":1,"petId":7,"quantity":2,"shipDate":"2026-12-01T10:00:00.000Z"}`)

    const snapshot = async (): Promise<unknown> =>
      (await admin.query(`SELECT (SELECT count(*) FROM orders) AS orders, (SELECT count(*) FROM order_events) AS events,
        (SELECT count(*) FROM idempotency_keys) AS keys, (SELECT version FROM data_version) AS version`)).rows[0]
    const before = await snapshot()
    assert.deepEqual(await second.orders.place({ order: NEW_ORDER, idempotency: claim('exhausted') }), { outcome: 'ids_exhausted' })
    assert.deepEqual(await first.orders.place({ order: NEW_ORDER }), { outcome: 'ids_exhausted' })
    assert.deepEqual(await snapshot(), before)
  })

  it('replays a place after the store is closed and reopened, and places again once its key has expired', async () => {
    // A database of its own: the one above has no id left.
    const other = await createTestDatabase()
    let store = new PostgresStore(other.url)
    try {
      await store.migrate()
      const placed = await store.orders.place({ order: NEW_ORDER, idempotency: claim('kept') })
      const expired = await store.orders.place({ order: NEW_ORDER, idempotency: claim('expired', 'a'.repeat(64), new Date(Date.now() - 1)) })
      await store.close()
      store = new PostgresStore(other.url)
      await store.migrate()
      const replayed = await store.orders.place({ order: NEW_ORDER, idempotency: claim('kept') })
      assert.equal(replayed.outcome, 'replayed')
      assert.deepEqual(placedJson(replayed), placedJson(placed))
      assert.deepEqual(await store.orders.place({ order: NEW_ORDER, idempotency: claim('kept', 'c'.repeat(64)) }), { outcome: 'key_reused' })
      // An expired record is ignored and replaced: the same key places a new order, with any body.
      const again = await store.orders.place({ order: NEW_ORDER, idempotency: claim('expired', 'd'.repeat(64)) })
      assert.equal(again.outcome, 'placed')
      assert.ok(placedJson(again).id > placedJson(expired).id)
      const replayedAgain = await store.orders.place({ order: NEW_ORDER, idempotency: claim('expired', 'd'.repeat(64)) })
      assert.deepEqual(placedJson(replayedAgain), placedJson(again))
    } finally {
      await store.close()
      await other.drop()
    }
  })
})
