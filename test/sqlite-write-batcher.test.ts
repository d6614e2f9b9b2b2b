import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import type { NewOrder } from '../src/domain/orders.js'
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js'
import { createDatabase, order, records, type TestDatabaseHandle } from './support/harness.js'

// SQLite's group commit of every write (src/store/sqlite/write-batcher.ts), on a real file: the
// writes of one turn share one transaction and run in arrival order; a failed batch commits nothing.

const NEW_ORDER: NewOrder = { petId: 1n, quantity: 1, shipDate: null }

describe('SQLite write batches', () => {
  let database: TestDatabaseHandle
  let store: SqliteStore
  let path: string

  before(async () => {
    database = await createDatabase('sqlite')
    path = (database.config as { path: string }).path
    store = new SqliteStore(path)
    await store.migrate()
  })

  after(async () => {
    await store?.close()
    await database?.dispose()
  })

  /** The data version as committed, read on a connection of the test's own. */
  function committedVersion(): bigint {
    const db = new Database(path, { readonly: true })
    try {
      db.defaultSafeIntegers(true)
      return db.prepare('SELECT version FROM data_version').pluck().get() as bigint
    } finally {
      db.close()
    }
  }

  it('the places, ships, completes and cancels of one turn share one transaction: one data version bump', async () => {
    await store.orders.import(records([order({ id: 1n }), order({ id: 2n }), order({ id: 3n, status: 'shipped' })]))
    const version = committedVersion()
    const results = await Promise.all([
      store.orders.place({ order: NEW_ORDER }),
      store.orders.place({ order: NEW_ORDER }),
      store.orders.ship(1n),
      store.orders.complete(3n),
      store.orders.cancel(2n, null),
    ])
    assert.deepEqual(
      results.map((result) => result.outcome),
      ['placed', 'placed', 'shipped', 'completed', 'cancelled'],
    )
    assert.equal(committedVersion(), version + 1n)
  })

  it('runs the writes of a batch in arrival order: a ship queued before a cancel of one order wins, and the reverse', async () => {
    await store.orders.import(records([order({ id: 10n }), order({ id: 11n })]))
    const [ship, cancel] = await Promise.all([store.orders.ship(10n), store.orders.cancel(10n, null)])
    assert.deepEqual([ship.outcome, cancel.outcome], ['shipped', 'already_shipped'])
    const [cancelFirst, shipLater] = await Promise.all([store.orders.cancel(11n, null), store.orders.ship(11n)])
    assert.deepEqual([cancelFirst.outcome, shipLater.outcome], ['cancelled', 'cancelled'])
    // A complete after the ship of its batch finds the order shipped.
    await store.orders.import(records([order({ id: 12n })]))
    const [, completed] = await Promise.all([store.orders.ship(12n), store.orders.complete(12n)])
    assert.equal(completed.outcome, 'completed')
  })

  it('a batch that fails commits nothing of any write in it, and every write in it is rejected', async () => {
    await store.orders.import(records([order({ id: 20n })]))
    const version = committedVersion()
    // A trigger that fails the batch's transaction: what a full disk would do at its commit.
    const db = new Database(path)
    db.exec(`CREATE TRIGGER fail_on_21 BEFORE INSERT ON orders WHEN NEW.id = 21 BEGIN SELECT raise(ABORT, 'no room'); END`)
    try {
      const results = await Promise.allSettled([store.orders.ship(20n), store.orders.place({ order: NEW_ORDER }), store.orders.cancel(20n, null)])
      assert.deepEqual(
        results.map((result) => result.status),
        ['rejected', 'rejected', 'rejected'],
      )
      assert.equal((await store.orders.find(20n))?.status, 'pending')
      assert.equal(await store.orders.find(21n), undefined)
      assert.equal(committedVersion(), version)
    } finally {
      db.exec('DROP TRIGGER fail_on_21')
      db.close()
    }
    // The next batch is not affected.
    assert.equal((await store.orders.place({ order: NEW_ORDER })).outcome, 'placed')
  })

  it('while another connection holds the write lock, the queued writes wait for it, with those queued meanwhile, in one batch', async () => {
    await store.orders.import(records([order({ id: 30n }), order({ id: 31n })]))
    const version = committedVersion()
    const other = new Database(path)
    other.exec('BEGIN IMMEDIATE') // as a CLI import holds it
    let results: Promise<unknown>[]
    try {
      const first = [store.orders.cancel(30n, null), store.orders.place({ order: NEW_ORDER })]
      await sleep(60) // the batch was refused for the lock at least once
      results = [...first, store.orders.ship(31n)]
      // And refused again with the ship in it: an attempt already under way when the ship was queued
      // cannot take it, and would commit without it if the lock were released now.
      await sleep(100)
    } finally {
      other.exec('COMMIT')
      other.close()
    }
    const settled = (await Promise.all(results)) as { outcome: string }[]
    assert.deepEqual(
      settled.map((result) => result.outcome),
      ['cancelled', 'placed', 'shipped'],
    )
    assert.equal(committedVersion(), version + 1n)
  })

  it('refuses a place whose values the database would refuse before it joins a batch', async () => {
    await assert.rejects(store.orders.place({ order: { ...NEW_ORDER, quantity: 0 } }), RangeError)
    await assert.rejects(store.orders.place({ order: { ...NEW_ORDER, petId: 2n ** 63n } }), RangeError)
  })
})
