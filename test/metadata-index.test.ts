import assert from 'node:assert/strict'
import Database from 'better-sqlite3'
import pg from 'pg'
import { after, before, it } from 'node:test'
import { POSTGRES_MIGRATIONS, SCHEMA_MIGRATIONS_TABLE } from '../src/store/postgres/migrations.js'
import { PostgresStore } from '../src/store/postgres/postgres-store.js'
import { SQLITE_MIGRATIONS } from '../src/store/sqlite/migrations.js'
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js'
import { bearer, createDatabase, forEachStore, startTestServer, type StoreKind, type TestServer } from './support/harness.js'
import { connectSql } from './support/sql.js'
import { parseExact, sql as sqlOf, type WireOrder } from './support/v2.js'

type Metadata = Record<string, string>
type Order = WireOrder & { metadata?: Metadata }

/** An order's rows in the metadata index, as one object's text (its keys in order), in either dialect; the order's id is `?`. */
function indexSql(kind: StoreKind): string {
  return kind === 'sqlite'
    ? `SELECT coalesce((SELECT json_group_object(key, value) FROM (SELECT key, value FROM order_metadata WHERE order_id = ? ORDER BY key)), '{}')`
    : `SELECT coalesce((SELECT json_object_agg(key, value ORDER BY key)::text FROM order_metadata WHERE order_id = ?), '{}')`
}

/** The rows of order `id` in the metadata index of `server`'s database, as one object. */
async function indexed(server: Pick<TestServer, 'database'>, id: string): Promise<Metadata> {
  return JSON.parse((await sqlOf(server, indexSql(server.database.kind), [id])) as string) as Metadata
}

const sorted = (metadata: Metadata | undefined): Metadata => Object.fromEntries(Object.entries(metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)))

// The metadata index (the table the list's metadata filter reads) is kept by the database from each
// order's metadata, in the statement that writes it. Whatever writes an order, alone or in a batch,
// the index holds exactly its metadata's pairs: the ones a change removed or replaced are gone, and a
// write that leaves metadata alone leaves them alone.
forEachStore('the metadata index follows every write of an order', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey({ scopes: ['orders:read', 'orders:write', 'orders:cancel'] })
  })
  after(() => server.close())

  async function send(method: string, path: string, body?: object): Promise<Order | undefined> {
    const response = await fetch(`${server.origin}${path}`, {
      method,
      headers: { ...bearer(key), ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await response.text()
    assert.ok(response.ok, `${method} ${path}: ${response.status} ${text}`)
    return text === '' ? undefined : parseExact<Order>(text)
  }

  async function assertIndexed(ids: string[]): Promise<void> {
    for (const id of ids) {
      const order = (await send('GET', `/v2/store/orders/${id}`))!
      assert.deepEqual(await indexed(server, id), sorted(order.metadata), `order ${id}`)
    }
  }

  it('places, patches in one batch, cancels and ships: the index holds each order\'s pairs, no other', async () => {
    const place = (metadata?: Metadata): Promise<Order> => send('POST', '/v2/store/orders', { petId: 7, quantity: 1, ...(metadata && { metadata }) }) as Promise<Order>
    const [a, b, c, d, e] = await Promise.all([
      place({ customer: 'c-1', channel: 'web' }),
      place({ customer: 'c-2' }),
      place(),
      place({ tier: 'gold' }),
      place({ tier: 'silver', customer: 'c-5' }),
    ])
    const ids = [a!, b!, c!, d!, e!].map((order) => order.id)
    await assertIndexed(ids)
    // Concurrent patches of distinct orders, batched together: one value replaced and a key added,
    // the last key removed, a first key added, and one that changes no metadata.
    await Promise.all([
      send('PATCH', `/v2/store/orders/${a!.id}`, { metadata: { channel: 'phone', note: 'gift' } }),
      send('PATCH', `/v2/store/orders/${b!.id}`, { metadata: { customer: null } }),
      send('PATCH', `/v2/store/orders/${c!.id}`, { metadata: { customer: 'c-1' } }),
      send('PATCH', `/v2/store/orders/${d!.id}`, { quantity: 3 }),
      send('PATCH', `/v2/store/orders/${e!.id}`, { metadata: { tier: null, customer: 'c-6' } }),
    ])
    await assertIndexed(ids)
    // Writes that change no metadata, in batches of their own.
    await Promise.all([send('POST', `/v2/store/orders/${d!.id}/cancel`), send('POST', `/v2/store/orders/${e!.id}/ship`)])
    await send('PATCH', `/v2/store/orders/${a!.id}`, { metadata: { customer: 'c-9' } })
    await assertIndexed(ids)

    const listed = await fetch(`${server.origin}/v2/store/orders?metadata[customer]=c-1`, { headers: bearer(key) })
    const page = parseExact<{ data: Order[] }>(await listed.text())
    assert.deepEqual(
      page.data.map((order) => order.id),
      [c!.id],
      'only the order whose metadata has the pair now',
    )
  })
})

// The migration that dropped the index by order_id and (on PostgreSQL) made the trigger one per
// statement: a database made by the migrations before it keeps its index rows, and a change of
// metadata after it removes the old pairs by their own key.
forEachStore('the metadata index across its migration', (kind) => {
  const last = kind === 'sqlite' ? 9 : 15

  it(`a database at migration ${last} with metadata: migrated, its index kept and then followed`, async () => {
    const database = await createDatabase(kind)
    try {
      if (database.config.kind === 'sqlite') {
        const db = new Database(database.config.path)
        db.exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
        for (const migration of SQLITE_MIGRATIONS.filter((m) => m.version <= last)) {
          db.exec(migration.sql)
          db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(migration.version, migration.name, new Date().toISOString())
        }
        db.exec(`INSERT INTO orders (id, pet_id, quantity, metadata) VALUES (1, 7, 1, '{"customer":"c-1","channel":"web"}'), (2, 7, 1, NULL)`)
        db.close()
        const store = new SqliteStore(database.config.path)
        try {
          assert.deepEqual(await store.migrate(), SQLITE_MIGRATIONS.filter((m) => m.version > last).map((m) => m.version))
        } finally {
          await store.close()
        }
      } else {
        const client = new pg.Client({ connectionString: database.url })
        await client.connect()
        try {
          await client.query(SCHEMA_MIGRATIONS_TABLE)
          for (const migration of POSTGRES_MIGRATIONS.filter((m) => m.version <= last)) {
            await client.query(migration.sql)
            await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
          }
          await client.query(`INSERT INTO orders (id, pet_id, quantity, complete, status, metadata) VALUES (1, 7, 1, false, 'pending', '{"customer":"c-1","channel":"web"}'), (2, 7, 1, false, 'pending', NULL)`)
        } finally {
          await client.end()
        }
        const store = new PostgresStore(database.url, { poolSize: 2 })
        try {
          assert.deepEqual(await store.migrate(), POSTGRES_MIGRATIONS.filter((m) => m.version > last).map((m) => m.version))
        } finally {
          await store.close()
        }
      }
      const sql = await connectSql(database)
      const index = (id: string): Promise<Metadata> => indexed({ database }, id)
      try {
        assert.deepEqual(await index('1'), { channel: 'web', customer: 'c-1' }, 'the rows the old trigger wrote are kept')
        await sql.query(`UPDATE orders SET metadata = '{"customer":"c-2"}' WHERE id = 1`)
        await sql.query(`UPDATE orders SET metadata = '{"tier":"gold"}' WHERE id = 2`)
        await sql.query(`UPDATE orders SET quantity = 2 WHERE id IN (1, 2)`)
        assert.deepEqual(await index('1'), { customer: 'c-2' })
        assert.deepEqual(await index('2'), { tier: 'gold' })
        await sql.query(`UPDATE orders SET metadata = NULL WHERE id = 1`)
        assert.deepEqual(await index('1'), {})
        assert.deepEqual(await index('2'), { tier: 'gold' })
        const named = kind === 'sqlite' ? `SELECT name FROM sqlite_master WHERE name = 'order_metadata_order'` : `SELECT indexname AS name FROM pg_indexes WHERE indexname = 'order_metadata_order'`
        assert.deepEqual(await sql.query(named), [], 'the index by order_id is gone')
      } finally {
        await sql.close()
      }
    } finally {
      await database.dispose()
    }
  })
})
