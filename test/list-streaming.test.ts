import assert from 'node:assert/strict'
import { request, type IncomingMessage } from 'node:http'
import { before, it } from 'node:test'
import pg from 'pg'
import fastJson from 'fast-json-stringify'
import Type from 'typebox'
import type { OrderRecord } from '../src/domain/orders.js'
import { Order } from '../src/schemas/order.js'
import type { PostgresStore } from '../src/store/postgres/postgres-store.js'
import { bearer, forEachStore, listedOrder, order, sqliteReaderReleased, startTestServer, within, type TestServer } from './support/harness.js'

const COUNT = 150_000

/** What a naive implementation sends: every open order, ascending id, built as one string. */
function naiveList(orders: OrderRecord[]): string {
  const open = orders.filter((o) => o.status !== 'cancelled').sort((a, b) => (a.id < b.id ? -1 : 1))
  return `[${open
    .map((o) => {
      const fields = [`"id":${o.id}`]
      if (o.petId !== null) fields.push(`"petId":${o.petId}`)
      if (o.quantity !== null) fields.push(`"quantity":${o.quantity}`)
      if (o.shipDate !== null) fields.push(`"shipDate":"${o.shipDate}"`)
      fields.push(`"complete":${o.complete}`)
      return `{${fields.join(',')}}`
    })
    .join(',')}]`
}

forEachStore('listOrders streaming', (kind) => {
  let server: TestServer
  let key: string
  const orders: OrderRecord[] = Array.from({ length: COUNT }, (_, i) => {
    const status = (['pending', 'shipped', 'cancelled'] as const)[i % 3]!
    return order({
      id: BigInt(COUNT - i) * 1_000_000_007n, // far beyond 2^53 for most, inserted out of order
      petId: i % 5 === 0 ? null : BigInt(i) * 97n + 2n ** 53n,
      quantity: i % 7 === 0 ? null : (i % 10) + 1,
      shipDate: i % 4 === 0 ? null : new Date(Date.UTC(2026, 10, 1) + i * 60_000).toISOString(),
      complete: status === 'shipped' && i % 2 === 0,
      status,
    })
  })

  before(async () => {
    server = await startTestServer(kind, { env: { LIST_CACHE_MAX_BYTES: '0', RATE_LIMIT_PER_KEY: '0' } })
    key = await server.createKey()
    await server.importOrders(orders)
  })

  it(`streams exactly what a naive implementation builds (${COUNT} orders, many batches)`, async () => {
    const response = await fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': 'identity' } })
    assert.equal(response.headers.get('transfer-encoding'), 'chunked')
    assert.equal(await response.text(), naiveList(orders))
  })

  it("pages of JSON written by the database equal the Order schema's own serializer", async () => {
    // The route's response schema is an array of Order; fast-json-stringify is what Fastify compiles it with.
    const serialize = fastJson(Type.Array(Order) as object, {}) as (orders: unknown[]) => string
    const objects = orders
      .filter((o) => o.status !== 'cancelled')
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .map(listedOrder)
    const pages: string[] = []
    for await (const page of server.store.orders.streamJson()) pages.push(page.toString())
    assert.ok(pages.length > 10)
    assert.equal(`[${pages.join(',')}]`, serialize(objects))
  })

  it('releases the cursor while a client is still reading slowly, and still sends it the whole list', async () => {
    const released = kind === 'sqlite' ? sqliteReaderReleased(server) : postgresCursorReleased(server)
    const pending = orders.filter((o) => o.status === 'pending')
    const cancel = (o: OrderRecord) => fetch(`${server.origin}/v1/store/orders/${o.id}`, { method: 'DELETE', headers: bearer(key) })
    const expected = naiveList(orders)
    const chunks: Buffer[] = []
    let res: IncomingMessage | undefined
    await new Promise<void>((resolve) => {
      const req = request(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': 'identity' } }, (response) => {
        res = response
        response.once('data', (chunk: Buffer) => {
          chunks.push(chunk)
          response.pause() // a slow reader: it takes nothing more for now
          resolve()
        })
      })
      req.on('error', () => {})
      req.end()
    })
    // The list is read from the database at the database's pace, not the client's: the paused
    // client holds no cursor, and a write past its snapshot does not wait on it.
    assert.equal((await cancel(pending[0]!)).status, 204)
    await within(15_000, 'the cursor released while the client is paused', released, 50)
    const body = new Promise<string>((resolve, reject) => {
      res!.on('data', (chunk: Buffer) => chunks.push(chunk))
      res!.on('end', () => resolve(Buffer.concat(chunks).toString()))
      res!.on('error', reject)
    })
    res!.resume()
    // The list of the version it asked for: before the cancel it was overtaken by.
    assert.equal(await body, expected)
  })
})

/**
 * PostgreSQL: the list's connection is back in the pool (or closed), and no connection of the
 * service is still running a statement. The pool counts too: PostgreSQL may have finished the COPY
 * into the socket buffers well before the server has read it all.
 */
function postgresCursorReleased(server: TestServer): () => Promise<boolean> {
  const store = server.store as PostgresStore
  return async () => {
    const pool = store.poolStats()
    if (pool.idle !== pool.total) return false
    const client = new pg.Client({ connectionString: server.database.url })
    await client.connect()
    try {
      const { rows } = await client.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'petstore-orders' AND state <> 'idle'`,
      )
      return rows[0].n === 0
    } finally {
      await client.end()
    }
  }
}
