import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { canonicalFilters, type OrderFilters } from '../src/domain/order-pages.js'
import { ApiError } from '../src/errors.js'
import { Cursors, filtersDigest } from '../src/http/cursor.js'
import { orderPageStatement } from '../src/store/order-page-sql.js'
import { POSTGRES_PAGE_DIALECT } from '../src/store/postgres/order-pages.js'
import { SQLITE_PAGE_DIALECT } from '../src/store/sqlite/order-pages.js'

// A filter OrderFilters does not have (yet): what a new one looks like to the code that must tell
// filters apart, before anyone remembers to list it there.
const withColour = (filters: OrderFilters, colour: string): OrderFilters => ({ ...filters, colour }) as OrderFilters

const DEFAULT: OrderFilters = { statuses: ['pending', 'shipped'] }

function invalidCursor(message: RegExp): (error: unknown) => boolean {
  return (error) => error instanceof ApiError && error.code === 'invalid_cursor' && message.test(error.message)
}

describe('the cursor digests every filter, in one canonical form', () => {
  it('a filter key it has never heard of changes the digest, and each of its values does', () => {
    const plain = filtersDigest(DEFAULT)
    const red = filtersDigest(withColour(DEFAULT, 'red'))
    assert.notDeepEqual(red, plain)
    assert.notDeepEqual(filtersDigest(withColour(DEFAULT, 'blue')), red)
    assert.deepEqual(filtersDigest(withColour(DEFAULT, 'red')), red)
  })

  it('the same filters in any key order, with undefined keys, or statuses in any order and repeated, are the same', () => {
    const filters: OrderFilters = { statuses: ['pending', 'shipped'], petId: 5n, complete: false, shipDateFrom: '2026-01-01T00:00:00.000Z' }
    const same = { shipDateFrom: '2026-01-01T00:00:00.000Z', complete: false, shipDateTo: undefined, petId: 5n, statuses: ['shipped', 'pending', 'shipped'] } as OrderFilters
    assert.equal(canonicalFilters(same), canonicalFilters(filters))
    assert.deepEqual(filtersDigest(same), filtersDigest(filters))
    assert.deepEqual(filtersDigest({ ...DEFAULT, petId: undefined }), filtersDigest(DEFAULT))
  })

  it('every value counts, int64 exactly', () => {
    const digests = [
      DEFAULT,
      { statuses: ['pending'] },
      { ...DEFAULT, petId: 2n ** 63n - 1n },
      { ...DEFAULT, petId: 2n ** 63n - 2n }, // the same JS number as 2^63 - 1
      { ...DEFAULT, complete: false },
      { ...DEFAULT, complete: true },
      { ...DEFAULT, shipDateFrom: '2026-01-01T00:00:00.000Z' },
      { ...DEFAULT, shipDateTo: '2026-01-01T00:00:00.000Z' },
    ].map((filters) => filtersDigest(filters as OrderFilters).toString('hex'))
    assert.equal(new Set(digests).size, digests.length)
  })

  it('a cursor issued with a filter is refused without it, or with another value of it', () => {
    const cursors = new Cursors(randomBytes(32))
    const cursor = cursors.encode(withColour(DEFAULT, 'red'), 2n ** 63n - 1n)
    assert.equal(cursors.decode(cursor, withColour(DEFAULT, 'red')), 2n ** 63n - 1n)
    assert.throws(() => cursors.decode(cursor, DEFAULT), invalidCursor(/other filters/))
    assert.throws(() => cursors.decode(cursor, withColour(DEFAULT, 'blue')), invalidCursor(/other filters/))
  })

  it('a genuine cursor of the earlier format (version 1, its digest of a fixed list of filters) is refused: start the walk again', () => {
    const secret = randomBytes(32)
    const payload = Buffer.alloc(25)
    payload.writeUInt8(1, 0)
    payload.writeBigInt64BE(10n, 17)
    const tag = createHmac('sha256', secret).update('petstore-orders v2 list cursor\0').update(payload).digest().subarray(0, 16)
    const old = Buffer.concat([payload, tag]).toString('base64url')
    assert.throws(() => new Cursors(secret).decode(old, DEFAULT), invalidCursor(/another version of this API/))
  })
})

describe('the fast path (one keyset read on the primary key) is taken for no filter but the status', () => {
  for (const dialect of [SQLITE_PAGE_DIALECT, POSTGRES_PAGE_DIALECT]) {
    const keyset = (filters: OrderFilters): boolean => !/\bIN \(/.test(orderPageStatement({ filters, limit: 10 }, dialect)!.sql)

    it(`${dialect === SQLITE_PAGE_DIALECT ? 'SQLite' : 'PostgreSQL'}: taken for pending and shipped (and cancelled), not once any other key is given`, () => {
      assert.ok(keyset(DEFAULT))
      assert.ok(keyset({ statuses: ['pending', 'shipped', 'cancelled'] }))
      assert.ok(keyset({ ...DEFAULT, petId: undefined }), 'a key left undefined is no filter')
      assert.ok(!keyset({ statuses: ['pending'] }))
      for (const filters of [withColour(DEFAULT, 'red'), { ...DEFAULT, petId: 1n }, { ...DEFAULT, complete: true }, { ...DEFAULT, shipDateTo: '2026-01-01T00:00:00.000Z' }]) {
        assert.ok(!keyset(filters), canonicalFilters(filters))
      }
    })
  }
})
