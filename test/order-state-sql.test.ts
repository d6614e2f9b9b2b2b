import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import { CANCEL, COMPLETE, isInState, SHIP, type OrderWriteRule } from '../src/domain/order-writes.js'
import type { OrderV2Record } from '../src/domain/orders.js'
import { orderStateAssignments, orderStateCondition } from '../src/store/order-state-sql.js'
import { forEachStore, order, records, storeForSuite, type StoreKind } from './support/harness.js'
import { connectSql, type Sql } from './support/sql.js'

// A conditional write's states are the domain's (domain/order-writes.ts); each store renders them as
// SQL (store/order-state-sql.ts). On each store's real schema, an order meets a rule's condition
// exactly when the domain says it is in the rule's `from`, and the assignments leave it in `to`.

const RULES = { cancel: CANCEL, ship: SHIP, complete: COMPLETE } as Record<string, OrderWriteRule<unknown>>

// An order in each state an order can be in: id → its state.
const STATES = new Map<bigint, Pick<OrderV2Record, 'status' | 'complete'>>([
  [1n, { status: 'pending', complete: false }],
  [2n, { status: 'shipped', complete: false }],
  [3n, { status: 'shipped', complete: true }],
  [4n, { status: 'cancelled', complete: false }],
])

const asOrder = (state: Pick<OrderV2Record, 'status' | 'complete'>): OrderV2Record => ({ ...state }) as OrderV2Record

it('each rule answers "it can still take the write" exactly for an order in its `from`', () => {
  for (const [name, rule] of Object.entries(RULES)) {
    for (const state of STATES.values()) {
      const order = { ...asOrder(state), id: 1n, version: 3 }
      assert.equal(rule.missed(order) === undefined, isInState(order, rule.from), `${name} of a ${JSON.stringify(state)} order`)
      assert.deepEqual(rule.missed(order, 2), { outcome: 'precondition_failed', version: 3 }, `${name} with a stale version`)
    }
    assert.ok(isInState({ ...asOrder({ status: 'pending', complete: false }), ...rule.to } as OrderV2Record, rule.to), name)
  }
})

forEachStore('the write rules as SQL', (kind: StoreKind) => {
  let sql: Sql
  after(() => sql?.close()) // hooks run in the order they are added: this before the store's
  const suite = storeForSuite(kind)

  before(async () => {
    await suite.store.orders.import(records([...STATES].map(([id, state]) => order({ id, ...state }))))
    sql = await connectSql(suite.database)
  })

  for (const [name, rule] of Object.entries(RULES)) {
    it(`${name}: the condition selects exactly the orders in its \`from\``, async () => {
      const rows = await sql.query<{ id: bigint | string }>(`SELECT id FROM orders o WHERE ${orderStateCondition(rule.from, 'o')} ORDER BY id`)
      const expected = [...STATES].filter(([, state]) => isInState(asOrder(state), rule.from)).map(([id]) => String(id))
      assert.ok(expected.length > 0, 'some order can take the write')
      assert.deepEqual(rows.map((row) => String(row.id)), expected)
    })

    it(`${name}: the assignments leave an order in its \`to\``, async () => {
      await sql.query('BEGIN')
      try {
        await sql.query(`UPDATE orders SET ${orderStateAssignments(rule.to)} WHERE ${orderStateCondition(rule.from)}`)
        const moved = await sql.query<{ id: bigint | string }>(`SELECT id FROM orders WHERE ${orderStateCondition(rule.to)} ORDER BY id`)
        const from = [...STATES].filter(([, state]) => isInState(asOrder(state), rule.from)).map(([id]) => String(id))
        for (const id of from) assert.ok(moved.some((row) => String(row.id) === id), `order ${id} is in ${JSON.stringify(rule.to)}`)
      } finally {
        await sql.query('ROLLBACK')
      }
    })
  }
})
