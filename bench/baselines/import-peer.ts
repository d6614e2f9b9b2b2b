/**
 * Child process, the import's peer: a plain better-sqlite3 program that loads the bench's orders
 * into the database of DATABASE_URL (a SQLite file, migrated by the project first, so both write
 * the same tables and indexes with the same settings) in one transaction, row by row: a prepared
 * INSERT of each order and a prepared INSERT of its event, whose body is the order's JSON made by
 * JSON.stringify. No upsert, no status check: what an import costs at the least.
 * argv: <orders>. Tells `{type: 'imported', orders, importSeconds}`.
 */
import Database from 'better-sqlite3'
import { loadDatabaseConfig } from '../../src/config.js'
import { openStore } from '../../src/store/open-store.js'
import { failed, tell } from '../lib/child-side.js'
import { orderRecords } from '../lib/dataset.js'

try {
  const orders = Number(process.argv[2])
  const config = loadDatabaseConfig()
  if (config.kind !== 'sqlite') throw new Error('the import peer runs on SQLite only')
  const store = await openStore(config)
  await store.migrate()
  await store.close()

  const db = new Database(config.path)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.defaultSafeIntegers(true)
  const insertOrder = db.prepare(
    'INSERT INTO orders (id, pet_id, quantity, ship_date, complete, status, cancelled_at, cancellation_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  )
  const insertEvent = db.prepare('INSERT INTO order_events (occurred_at, order_id, type, body) VALUES (?, ?, ?, ?)')
  const started = process.hrtime.bigint()
  const now = new Date().toISOString()
  db.exec('BEGIN')
  let count = 0
  for await (const order of orderRecords(orders)) {
    const cancelledAt = order.status === 'cancelled' ? (order.cancelledAt ?? now) : null
    insertOrder.run(order.id, order.petId, order.quantity, order.shipDate, order.complete ? 1 : 0, order.status, cancelledAt, order.cancellationReason ?? null)
    const body = JSON.stringify({
      type: 'order.created',
      occurredAt: now,
      order: { id: `${order.id}`, complete: order.complete, status: order.status, petId: order.petId === null ? undefined : `${order.petId}`, quantity: order.quantity ?? undefined, shipDate: order.shipDate ?? undefined },
    })
    insertEvent.run(now, order.id, 'order.created', body)
    count++
  }
  db.exec('COMMIT')
  const importSeconds = Number(process.hrtime.bigint() - started) / 1e9
  db.close()
  tell({ type: 'imported', orders: count, importSeconds })
  process.exit(0)
} catch (error) {
  failed(error)
}
