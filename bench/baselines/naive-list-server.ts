/**
 * Baseline of comparison 1: the straightforward implementation of listOrders. Each GET runs the same
 * query as the project's store (`… WHERE status <> 'cancelled' ORDER BY id`) with .all()
 * (better-sqlite3, safeIntegers) or one plain pg query (int8 parsed to bigint), maps the rows to
 * Order objects, builds one JSON string with exact int64 ids and sends it with its Content-Length.
 * No streaming, no cache; nothing is made slow on purpose. It even skips authentication, which only
 * favours it.
 *
 * GET /v1/pets/{id} answers one pet by id (one indexed read), so that small requests can be timed
 * against it while it builds a list. Child process of bench/run.ts; DATABASE_URL as the project's.
 */
import { createServer, type ServerResponse } from 'node:http'
import Database from 'better-sqlite3'
import pg from 'pg'
import { loadDatabaseConfig } from '../../src/config.js'
import { failed, onShutdown, tell } from '../lib/child-side.js'

interface Row {
  id: bigint
  pet_id: bigint | null
  quantity: bigint | number | null
  ship_date: string | null
  complete: bigint | boolean
}

interface Order {
  id: bigint
  petId?: bigint
  quantity?: number
  shipDate?: string
  complete: boolean
}

interface Source {
  orders(): Promise<Row[]>
  pet(id: bigint): Promise<{ id: bigint; name: string; tag: string | null } | undefined>
  close(): Promise<void>
}

const SQLITE_LIST = `SELECT id, pet_id, quantity, ship_date, complete FROM orders WHERE status <> 'cancelled' ORDER BY id`
const POSTGRES_LIST = `SELECT id, pet_id, quantity,
    to_char(ship_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS ship_date, complete
  FROM orders WHERE status <> 'cancelled' ORDER BY id`

function openSource(): Source {
  const database = loadDatabaseConfig()
  if (database.kind === 'sqlite') {
    const db = new Database(database.path, { readonly: true, fileMustExist: true })
    db.pragma('busy_timeout = 5000')
    db.defaultSafeIntegers(true)
    const list = db.prepare(SQLITE_LIST)
    const pet = db.prepare('SELECT id, name, tag FROM pets WHERE id = ?')
    return {
      orders: async () => list.all() as Row[],
      pet: async (id) => pet.get(id) as { id: bigint; name: string; tag: string | null } | undefined,
      close: async () => {
        db.close()
      },
    }
  }
  const int8 = (value: string): bigint => BigInt(value)
  const pool = new pg.Pool({
    connectionString: database.url,
    max: 10,
    types: { getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === 20 ? int8 : pg.types.getTypeParser(oid, format))) as typeof pg.types.getTypeParser },
  })
  return {
    orders: async () => (await pool.query<Row>(POSTGRES_LIST)).rows,
    pet: async (id) => (await pool.query<{ id: bigint; name: string; tag: string | null }>('SELECT id, name, tag FROM pets WHERE id = $1', [id.toString()])).rows[0],
    close: () => pool.end(),
  }
}

function toOrder(row: Row): Order {
  const order: Order = { id: row.id, complete: row.complete === true || row.complete === 1n }
  if (row.pet_id !== null) order.petId = row.pet_id
  if (row.quantity !== null) order.quantity = Number(row.quantity)
  if (row.ship_date !== null) order.shipDate = row.ship_date
  return order
}

/** JSON with the ids as exact integer literals (JSON.stringify cannot write a bigint). */
function serialize(orders: Order[]): string {
  const parts = orders.map((order) => {
    let json = `{"id":${order.id}`
    if (order.petId !== undefined) json += `,"petId":${order.petId}`
    if (order.quantity !== undefined) json += `,"quantity":${order.quantity}`
    if (order.shipDate !== undefined) json += `,"shipDate":${JSON.stringify(order.shipDate)}`
    return `${json},"complete":${order.complete}}`
  })
  return `[${parts.join(',')}]`
}

function send(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

try {
  const source = openSource()
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!
    const pet = /^\/v1\/pets\/([0-9]{1,18})$/.exec(path)
    const answer = async (): Promise<void> => {
      if (req.method === 'GET' && path === '/v1/store/orders') {
        const rows = await source.orders()
        return send(res, 200, serialize(rows.map(toOrder)))
      }
      if (req.method === 'GET' && pet !== null) {
        const found = await source.pet(BigInt(pet[1]!))
        if (found === undefined) return send(res, 404, '{"code":"pet_not_found","message":"No such pet.","status":404}')
        const tag = found.tag === null ? '' : `,"tag":${JSON.stringify(found.tag)}`
        return send(res, 200, `{"id":${found.id},"name":${JSON.stringify(found.name)}${tag}}`)
      }
      send(res, 404, '{"code":"not_found","message":"Not found.","status":404}')
    }
    answer().catch((error: unknown) => {
      console.error(error)
      if (!res.headersSent) send(res, 500, '{"code":"internal","message":"Internal error.","status":500}')
      else res.destroy()
    })
  })
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('no TCP address')
    tell({ type: 'ready', url: `http://127.0.0.1:${address.port}` })
  })
  onShutdown(async () => {
    await new Promise<void>((done) => server.close(() => done()))
    await source.close()
  })
} catch (error) {
  failed(error)
}
