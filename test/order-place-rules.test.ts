import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { keyAnswer, keyLiveAfter, type StoredKey } from '../src/domain/idempotency.js'
import { INT64_MAX } from '../src/domain/int64.js'
import { PlaceAdmission, PLACED_IDS, placedId } from '../src/domain/order-places.js'
import type { IdempotencyClaim, NewOrder, PlaceRequest, PlaceResult } from '../src/domain/orders.js'
import { GroupCommit } from '../src/store/group-commit.js'
import { within } from './support/harness.js'

// The rules of a place, without a database: which places join a batch (PlaceAdmission, here in front
// of a group commit, as both stores have it), the ids new orders take, and when a key's record still
// answers. Both stores take them from domain/; test/store-writes.test.ts holds them on both.

const NEW_ORDER: NewOrder = { petId: 7n, quantity: 2, shipDate: '2026-12-01T10:00:00.000Z' }
const NOW = '2026-12-01T10:00:00.000Z'

function claim(key: string): IdempotencyClaim {
  return { apiKeyId: 1n, key, fingerprint: 'a'.repeat(64), expiresAt: new Date(Date.now() + 3_600_000) }
}

const request = (key?: string, order = NEW_ORDER): PlaceRequest => ({ order, idempotency: key === undefined ? undefined : claim(key) })

const placed = (n: number): PlaceResult => ({
  outcome: 'placed',
  order: { ...NEW_ORDER, id: BigInt(n), complete: false, status: 'pending', shippedAt: null, completedAt: null, cancelledAt: null, cancellationReason: null, metadata: null, version: 1 },
})

/**
 * A store's way in for places: admitted, then group-committed by `commit`; `records` holds the keys'
 * committed records, as the store's read finds them (none unless a test puts one there).
 */
function places(
  commit: (requests: PlaceRequest[]) => Promise<PlaceResult[]>,
  records = new Map<string, StoredKey>(),
): (request: PlaceRequest) => Promise<PlaceResult> {
  const admission = new PlaceAdmission(async (_apiKeyId, key) => records.get(key))
  const batches = new GroupCommit<PlaceRequest, PlaceResult>({ commit })
  return (request) => admission.admit(request, (admitted) => batches.submit(admitted))
}

describe('PlaceAdmission', () => {
  it('answers key_in_use for a key queued or in flight here while it has no record, and frees the key once that place has settled', async () => {
    let commit!: () => void
    let sent = 0
    const place = places(async (requests) => {
      sent += requests.length
      await new Promise<void>((resolve) => (commit = resolve))
      return requests.map((_, i) => placed(i + 1))
    })
    const first = place(request('k'))
    assert.deepEqual(await place(request('k')), { outcome: 'key_in_use' }) // queued
    await nextTurn()
    assert.deepEqual(await place(request('k')), { outcome: 'key_in_use' }) // in flight
    const other = place(request('other'))
    const unkeyed = place(request())
    commit()
    assert.equal((await first).outcome, 'placed')
    assert.equal(sent, 1)
    await within(15_000, 'the next batch starts', () => sent === 3)
    commit()
    await Promise.all([other, unkeyed])
    const again = place(request('k'))
    await within(15_000, 'the retry joins a batch', () => sent === 4)
    commit()
    assert.equal((await again).outcome, 'placed')
  })

  it('answers a place whose key is held from the key\'s live record: a replay, or key_reused for another body', async () => {
    const records = new Map<string, StoredKey>()
    let commit!: () => void
    const place = places(async (requests) => {
      await new Promise<void>((resolve) => (commit = resolve))
      // A replay of a committed place: the batch answers it from its record, as a store does.
      return requests.map(() => ({ outcome: 'replayed', orderId: 42n, status: 201, body: '{"id":42}' }) as const)
    }, records)
    const live = new Date(Date.now() + 3_600_000).toISOString()
    records.set('k', { fingerprint: 'a'.repeat(64), orderId: 42n, responseStatus: 201n, responseBody: '{"id":42}', expiresAt: live })
    const first = place(request('k'))
    // Held by the first, which is queued: the others read the committed record instead of key_in_use.
    assert.deepEqual(await place(request('k')), { outcome: 'replayed', orderId: 42n, status: 201, body: '{"id":42}' })
    assert.deepEqual(await place({ ...request('k'), idempotency: { ...claim('k'), fingerprint: 'b'.repeat(64) } }), { outcome: 'key_reused' })
    // An expired record answers nothing: the place holding the key may be replacing it.
    records.set('k', { ...records.get('k')!, expiresAt: new Date(Date.now() - 1).toISOString() })
    assert.deepEqual(await place(request('k')), { outcome: 'key_in_use' })
    await nextTurn()
    commit()
    assert.equal((await first).outcome, 'replayed')
  })

  it('answers a place the store found held by another process from the key\'s record too', async () => {
    const records = new Map<string, StoredKey>()
    const place = places(async (requests) => requests.map(() => ({ outcome: 'key_in_use' }) as const), records)
    assert.deepEqual(await place(request('k')), { outcome: 'key_in_use' }) // no record: still in flight there
    const live = new Date(Date.now() + 3_600_000).toISOString()
    records.set('k', { fingerprint: 'a'.repeat(64), orderId: 42n, responseStatus: 201n, responseBody: '{"id":42}', expiresAt: live })
    assert.deepEqual(await place(request('k')), { outcome: 'replayed', orderId: 42n, status: 201, body: '{"id":42}' })
  })

  it('rejects every place of a failed batch with its error, and frees their keys', async () => {
    const place = places(async () => {
      throw new Error('connection lost')
    })
    const results = await Promise.allSettled([place(request('k')), place(request())])
    assert.deepEqual(
      results.map((r) => r.status === 'rejected' && (r.reason as Error).message),
      ['connection lost', 'connection lost'],
    )
    // The key is free again: a retry joins the next batch.
    await assert.rejects(place(request('k')), /connection lost/)
  })

  it('refuses what checkNewOrder refuses with its RangeError, before any batch, without holding its key', async () => {
    const batches: PlaceRequest[][] = []
    const place = places(async (requests) => {
      batches.push(requests)
      return requests.map((_, i) => placed(i + 1))
    })
    await assert.rejects(place(request('k', { ...NEW_ORDER, quantity: 0 })), (error) => error instanceof RangeError && /^quantity must be/.test(error.message))
    await assert.rejects(place(request(undefined, { ...NEW_ORDER, petId: INT64_MAX + 1n })), RangeError)
    await assert.rejects(place(request(undefined, { ...NEW_ORDER, shipDate: '2026-02-30T00:00:00.000Z' })), RangeError)
    assert.deepEqual(batches, [])
    assert.equal((await place(request('k'))).outcome, 'placed')
    assert.equal(batches.length, 1)
  })
})

describe('placedId', () => {
  it('gives the ids above every id held, from 1', () => {
    assert.deepEqual(PLACED_IDS, { after: 0n, last: INT64_MAX })
    assert.equal(placedId(null), 1n) // an empty store
    assert.equal(placedId(-5n), 1n) // negative ids only
    assert.equal(placedId(0n), 1n)
    assert.equal(placedId(41n), 42n)
    assert.equal(placedId(2n ** 53n), 2n ** 53n + 1n) // exact past 2^53
  })

  it('numbers the places of one batch on from there', () => {
    assert.deepEqual([1n, 2n, 3n].map((n) => placedId(41n, n)), [42n, 43n, 44n])
    assert.deepEqual([1n, 2n].map((n) => placedId(null, n)), [1n, 2n])
  })

  it('leaves no id once 9223372036854775807 is held or would be passed', () => {
    assert.equal(placedId(INT64_MAX - 1n), INT64_MAX)
    assert.equal(placedId(INT64_MAX), undefined)
    assert.equal(placedId(INT64_MAX - 2n, 2n), INT64_MAX)
    assert.equal(placedId(INT64_MAX - 2n, 3n), undefined)
  })
})

describe('a key record and its expiry', () => {
  const stored = (expiresAt: string): StoredKey => ({ fingerprint: 'a'.repeat(64), orderId: 42n, responseStatus: 201n, responseBody: '{"id":42}', expiresAt })

  it('answers while the record expires after keyLiveAfter(now): the first response for the same body, key_reused for another', () => {
    assert.equal(keyLiveAfter(NOW), NOW)
    const live = stored('2026-12-01T10:00:00.001Z')
    assert.deepEqual(keyAnswer(live, 'a'.repeat(64), NOW), { outcome: 'replayed', orderId: 42n, status: 201, body: '{"id":42}' })
    assert.deepEqual(keyAnswer(live, 'b'.repeat(64), NOW), { outcome: 'key_reused' })
  })

  it('lets the place go on (and replace the record) once it expires at or before now, or when there is none', () => {
    assert.equal(keyAnswer(stored(NOW), 'a'.repeat(64), NOW), undefined)
    assert.equal(keyAnswer(stored('2026-12-01T09:59:59.999Z'), 'b'.repeat(64), NOW), undefined)
    assert.equal(keyAnswer(undefined, 'a'.repeat(64), NOW), undefined)
  })
})
