import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { after, before, it } from 'node:test'
import { ImportFileError, readOrderRecords } from '../src/cli/import-records.js'
import { checkNewOrder, type NewOrder } from '../src/domain/orders.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, forEachStore, type TestDatabaseHandle } from './support/harness.js'

// What a store refuses to place, and what an import refuses, on SQLite and PostgreSQL alike: one
// check (checkNewOrder) before a place joins a batch, and for each record an import reads.

const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)
const VALID: NewOrder = { petId: 7n, quantity: 2, shipDate: '2026-12-01T10:00:00.000Z' }

const REFUSED: Partial<NewOrder>[] = [
  { petId: INT64_MAX + 1n },
  { petId: INT64_MIN - 1n },
  { quantity: 0 },
  { quantity: -1 },
  { quantity: 2 ** 31 },
  { quantity: 1.5 },
  { shipDate: '0000-12-31T10:00:00.000Z' }, // PostgreSQL has no year 0
  { shipDate: '2026-13-01T10:00:00.000Z' },
  { shipDate: '2026-02-29T10:00:00.000Z' }, // not a leap year
  { shipDate: '2026-04-31T10:00:00.000Z' },
  { shipDate: '2026-12-01T24:00:00.000Z' },
  { shipDate: 'tomorrow' },
]
// RFC 3339, but not as stored: refused by a place; an import (as the API) reads them, and stores toISOString()'s form.
const NOT_AS_STORED: Partial<NewOrder>[] = [{ shipDate: '2026-12-01T10:00:00Z' }, { shipDate: '2026-12-01T10:00:00.000+00:00' }]
// The bounds, accepted: placed and imported as they are.
const ACCEPTED: Partial<NewOrder>[] = [
  { petId: INT64_MAX },
  { quantity: 1 },
  { quantity: 2 ** 31 - 1 },
  { shipDate: '0001-01-01T00:00:00.000Z' },
  { shipDate: '9999-12-31T23:59:59.999Z' },
  { shipDate: '2024-02-29T23:59:59.999Z' },
  { shipDate: '2026-01-31T00:00:00.000Z' },
  { shipDate: null },
]

/** An NDJSON file of one order record `id` with the fields of `order`. */
function importFile(id: bigint, order: Partial<NewOrder>): { open(): Readable } {
  const record = { id: id.toString(), ...order, petId: order.petId?.toString() }
  return { open: () => Readable.from([Buffer.from(JSON.stringify(record) + '\n')]) }
}

forEachStore('new order checks', (kind) => {
  let database: TestDatabaseHandle
  let store: Store

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
  })

  after(async () => {
    await store?.close()
    await database?.dispose()
  })

  it('place: refuses what checkNewOrder refuses with its RangeError, before the batch, which its other places leave unharmed', async () => {
    const version = await store.orders.dataVersion()
    for (const fields of [...REFUSED, ...NOT_AS_STORED]) {
      const order = { ...VALID, ...fields }
      const reason = checkNewOrder(order)
      assert.ok(reason !== undefined, JSON.stringify(fields, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)))
      // Queued in the same turn as a valid place: that one is placed all the same.
      const [refused, placed] = await Promise.allSettled([store.orders.place({ order }), store.orders.place({ order: VALID })])
      assert.equal(refused.status, 'rejected')
      assert.ok(refused.reason instanceof RangeError)
      assert.equal(refused.reason.message, reason)
      assert.equal(placed.status === 'fulfilled' && placed.value.outcome, 'placed')
    }
    assert.equal(await store.orders.dataVersion(), version + BigInt(REFUSED.length + NOT_AS_STORED.length), 'only the valid places changed anything')
  })

  it('place: accepts the bounds, and stores them as given', async () => {
    for (const fields of ACCEPTED) {
      const order = { ...VALID, ...fields }
      assert.equal(checkNewOrder(order), undefined)
      const result = await store.orders.place({ order })
      if (result.outcome !== 'placed') return assert.fail(result.outcome)
      const found = await store.orders.find(result.order.id)
      assert.deepEqual([found?.petId, found?.quantity, found?.shipDate], [order.petId, order.quantity, order.shipDate])
    }
  })

  it('import: refuses a record with what a place refuses, imports the bounds', async () => {
    for (const fields of REFUSED) {
      const file = importFile(1000n, fields)
      await assert.rejects(store.orders.import(readOrderRecords(file)), ImportFileError, JSON.stringify(fields, (_, v: unknown) => String(v)))
    }
    assert.equal(await store.orders.find(1000n), undefined, 'nothing imported')
    let id = 1000n
    for (const fields of ACCEPTED) {
      id++
      assert.equal(await store.orders.import(readOrderRecords(importFile(id, { ...VALID, ...fields }))), 1)
      const found = await store.orders.find(id)
      const order = { ...VALID, ...fields }
      assert.deepEqual([found?.petId, found?.quantity, found?.shipDate], [order.petId, order.quantity, order.shipDate])
    }
  })
})
