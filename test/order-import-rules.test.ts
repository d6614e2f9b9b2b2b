import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { importConflict, importedCancellation, IMPORT_MOVES, KEEPS_CANCELLATION } from '../src/domain/order-import.js'
import { canMoveTo, ORDER_STATUSES, type OrderRecord } from '../src/domain/orders.js'

// The import's rules, without a database: which moves of status it makes, the cancellation a record
// leaves, and how it names a refused record. Both stores take them from here (the SQLite store in
// JS, PostgreSQL's statement as parameters); test/store-contract.test.ts holds them on both.

const IMPORT_TIME = '2026-12-01T10:00:00.000Z'

function record(fields: Partial<OrderRecord> = {}): OrderRecord {
  return { id: 7n, petId: 3n, quantity: 1, shipDate: null, complete: false, status: 'pending', ...fields }
}

describe('import rules', () => {
  it('moves a status only forward: pending to anything, any status to itself, nothing out of shipped or cancelled', () => {
    assert.deepEqual(IMPORT_MOVES, [
      ['pending', 'pending'],
      ['pending', 'shipped'],
      ['pending', 'cancelled'],
      ['shipped', 'shipped'],
      ['cancelled', 'cancelled'],
    ])
    for (const from of ORDER_STATUSES) {
      for (const to of ORDER_STATUSES) {
        assert.equal(
          IMPORT_MOVES.some(([f, t]) => f === from && t === to),
          canMoveTo(from, to),
          `${from} → ${to}`,
        )
      }
    }
  })

  it('gives a cancelled record its own time and reason, or the import\'s one time and no reason', () => {
    const own = record({ status: 'cancelled', cancelledAt: '2026-11-20T08:15:00.123Z', cancellationReason: 'out_of_stock' })
    assert.deepEqual(importedCancellation(own, IMPORT_TIME), { cancelledAt: '2026-11-20T08:15:00.123Z', cancellationReason: 'out_of_stock' })
    assert.deepEqual(importedCancellation(record({ status: 'cancelled' }), IMPORT_TIME), { cancelledAt: IMPORT_TIME, cancellationReason: null })
    const reasonOnly = record({ status: 'cancelled', cancellationReason: 'duplicate' })
    assert.deepEqual(importedCancellation(reasonOnly, IMPORT_TIME), { cancelledAt: IMPORT_TIME, cancellationReason: 'duplicate' })
  })

  it('gives a record that is not cancelled no cancellation, whatever it carries', () => {
    for (const status of ['pending', 'shipped'] as const) {
      const stray = record({ status, cancelledAt: '2026-11-20T08:15:00.123Z', cancellationReason: 'other' })
      assert.deepEqual(importedCancellation(stray, IMPORT_TIME), { cancelledAt: null, cancellationReason: null })
    }
  })

  it('keeps the first cancellation of an order already cancelled; a pending order takes the record\'s', () => {
    assert.deepEqual(KEEPS_CANCELLATION, ['cancelled'])
    const first = { status: 'cancelled', cancelledAt: '2026-01-02T03:04:05.678Z', cancellationReason: 'customer_request' } as const
    const again = record({ status: 'cancelled', cancelledAt: '2030-01-01T00:00:00.000Z', cancellationReason: 'fraudulent' })
    assert.deepEqual(importedCancellation(again, IMPORT_TIME, first), { cancelledAt: first.cancelledAt, cancellationReason: first.cancellationReason })
    const withoutTime = record({ status: 'cancelled' })
    assert.deepEqual(importedCancellation(withoutTime, IMPORT_TIME, first), { cancelledAt: first.cancelledAt, cancellationReason: first.cancellationReason })
    const pending = { status: 'pending', cancelledAt: null, cancellationReason: null } as const
    assert.deepEqual(importedCancellation(again, IMPORT_TIME, pending), { cancelledAt: '2030-01-01T00:00:00.000Z', cancellationReason: 'fraudulent' })
  })

  it('names a refused record by its order, the status it has and the one it cannot take', () => {
    assert.equal(importConflict(400n, 'cancelled', 'pending'), 'order 400 is cancelled and cannot become pending')
    assert.equal(importConflict(9223372036854775807n, 'shipped', 'cancelled'), 'order 9223372036854775807 is shipped and cannot become cancelled')
  })
})
