/**
 * The import's peer, a whole program timed like `petstore-orders orders import FILE` from spawn to
 * exit: what a straightforward importer of the same file does. It reads the whole file
 * (readFileSync), quotes the int64 fields with one regular expression and parses it with
 * JSON.parse and a reviver that makes them bigints; then, in one transaction on the SQLite
 * database of DATABASE_URL (migrated by the project first: the same tables, indexes and triggers),
 * per record, it SELECTs the order's row, `INSERT OR REPLACE`s it and, when that changed it, INSERTs
 * its event with the order's JSON. No streaming (the file and every record sit in memory), no
 * validation beyond what the database checks.
 * argv: <file>.
 */
import { readFileSync } from 'node:fs'
import Database from 'better-sqlite3'

interface FileOrder {
  id: bigint
  petId?: bigint | null
  quantity?: number | null
  shipDate?: string | null
  status?: string | null
  complete?: boolean | null
}

const url = process.env.DATABASE_URL ?? ''
if (!url.startsWith('sqlite:')) throw new Error('the import peer runs on SQLite only (DATABASE_URL=sqlite:…)')
const text = readFileSync(process.argv[2]!, 'utf8').replace(/"(id|petId)":(\d+)/g, '"$1":"$2"')
const orders = JSON.parse(text, (key, value: unknown) => ((key === 'id' || key === 'petId') && typeof value === 'string' ? BigInt(value) : value)) as FileOrder[]

const db = new Database(url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, ''))
db.pragma('journal_mode = WAL')
db.pragma('synchronous = FULL')
db.defaultSafeIntegers(true)
const select = db.prepare('SELECT pet_id, quantity, ship_date, complete, status FROM orders WHERE id = ?')
const replace = db.prepare(
  'INSERT OR REPLACE INTO orders (id, pet_id, quantity, ship_date, complete, status, cancelled_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
)
const insertEvent = db.prepare('INSERT INTO order_events (occurred_at, order_id, type, body) VALUES (?, ?, ?, ?)')
const now = new Date().toISOString()
db.exec('BEGIN IMMEDIATE')
for (const order of orders) {
  const before = select.get(order.id) as { pet_id: bigint | null; quantity: bigint | null; ship_date: string | null; complete: bigint; status: string } | undefined
  const status = order.status ?? 'pending'
  const row = {
    petId: order.petId ?? null,
    quantity: order.quantity ?? null,
    shipDate: order.shipDate ?? null,
    complete: order.complete === true ? 1n : 0n,
    status,
  }
  replace.run(order.id, row.petId, row.quantity, row.shipDate, row.complete, status, status === 'cancelled' ? now : null)
  const changed =
    before === undefined ||
    before.pet_id !== row.petId ||
    (before.quantity === null ? null : Number(before.quantity)) !== row.quantity ||
    before.ship_date !== row.shipDate ||
    before.complete !== row.complete ||
    before.status !== status
  if (!changed) continue
  const json = JSON.stringify({
    id: `${order.id}`,
    petId: row.petId === null ? null : `${row.petId}`,
    quantity: row.quantity,
    shipDate: row.shipDate,
    complete: row.complete === 1n,
    status,
  })
  const type = before === undefined ? 'order.created' : 'order.updated'
  insertEvent.run(now, order.id, type, `{"type":"${type}","occurredAt":"${now}","order":${json}}`)
}
db.exec('COMMIT')
db.close()
process.stdout.write(`imported ${orders.length} orders\n`)
