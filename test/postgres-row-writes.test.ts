import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import type { CompleteResult, OrderRecord, ShipResult } from '../src/domain/orders.js'
import { PostgresStore } from '../src/store/postgres/postgres-store.js'
import { StoreUnavailableError } from '../src/store/store.js'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './support/postgres.js'

const skip = await postgresSkipReason()

function order(id: bigint, fields: Partial<OrderRecord> = {}): OrderRecord {
  return { id, petId: 7n, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z', complete: false, status: 'pending', ...fields }
}

async function* from<T>(items: Iterable<T>): AsyncIterable<T> {
  yield* items
}

// Ships and completes of orders another transaction holds locked are written on their own once it
// lets go, and answer as the batch would have (domain/order-writes.ts): from the order as it stands.
describe('PostgreSQL ships and completes of locked orders', { skip }, () => {
  let db: TestDatabase
  let store: PostgresStore

  before(async () => {
    db = await createTestDatabase()
    store = new PostgresStore(db.url, { poolSize: 5 })
    await store.migrate()
  })

  after(async () => {
    await store?.close()
    await db?.drop()
  })

  it('waits for the lock, then ships or completes what still can be, and answers for what changed meanwhile', async () => {
    const shipped = { status: 'shipped' } as const
    await store.orders.import(from([order(1n), order(2n), order(3n), order(4n, shipped), order(5n, shipped), order(6n, shipped)]))
    const start = await store.orders.dataVersion()
    const other = new pg.Client({ connectionString: db.url })
    await other.connect()
    try {
      await other.query('BEGIN')
      await other.query('SELECT 1 FROM orders WHERE id IN (2, 3, 5, 6) FOR UPDATE')
      const ships = [1n, 2n, 3n].map((id) => store.orders.ship(id))
      const completes = [4n, 5n, 6n].map((id) => store.orders.complete(id))
      assert.deepEqual((await Promise.all([ships[0]!, completes[0]!])).map((r) => r.outcome), ['shipped', 'completed'])
      let settled = false
      void Promise.allSettled([...ships.slice(1), ...completes.slice(1)]).then(() => (settled = true))
      await sleep(200)
      assert.equal(settled, false, 'the writes of the locked orders wait for the lock')
      await other.query(`UPDATE orders SET status = 'cancelled' WHERE id = 2`)
      await other.query(`UPDATE orders SET complete = true WHERE id = 5`)
      await other.query('COMMIT')
      const [cancelled, shippedAlone] = (await Promise.all(ships.slice(1))) as [ShipResult, ShipResult]
      const [complete, completedAlone] = (await Promise.all(completes.slice(1))) as [CompleteResult, CompleteResult]
      assert.deepEqual(cancelled, { outcome: 'cancelled' })
      assert.equal(complete.outcome, 'already_complete')
      if (shippedAlone.outcome !== 'shipped') return assert.fail(shippedAlone.outcome)
      if (completedAlone.outcome !== 'completed') return assert.fail(completedAlone.outcome)
      assert.deepEqual(shippedAlone.order, await store.orders.find(3n))
      assert.deepEqual(completedAlone.order, await store.orders.find(6n))
    } finally {
      await other.end()
    }
    // The batch of ships, the batch of completes, then each written alone; not the other transaction's changes.
    assert.equal(await store.orders.dataVersion(), start + 4n)
  })

  it('settles the writes asked before close(), those of a locked order too, and refuses those asked after', async () => {
    const closing = new PostgresStore(db.url, { poolSize: 3 })
    await closing.orders.import(from([order(11n), order(12n), order(13n, { status: 'shipped' })]))
    const other = new pg.Client({ connectionString: db.url })
    await other.connect()
    try {
      await other.query('BEGIN')
      await other.query('SELECT 1 FROM orders WHERE id = 12 FOR UPDATE')
      const asked = [closing.orders.cancel(11n, null), closing.orders.ship(12n), closing.orders.complete(13n)]
      const closed = closing.close()
      for (const write of [() => closing.orders.cancel(11n, null), () => closing.orders.ship(12n), () => closing.orders.complete(13n)]) {
        await assert.rejects(write(), StoreUnavailableError)
      }
      let done = false
      void closed.then(() => (done = true))
      await sleep(200)
      assert.equal(done, false, 'close() waits for the ship of the locked order')
      await other.query('COMMIT')
      await closed
      assert.deepEqual((await Promise.all(asked)).map((r) => r.outcome), ['cancelled', 'shipped', 'completed'])
    } finally {
      await other.end()
    }
  })
})
