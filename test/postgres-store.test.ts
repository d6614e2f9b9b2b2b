import assert from 'node:assert/strict'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import fastJson from 'fast-json-stringify'
import pg from 'pg'
import Type from 'typebox'
import type { CancelResult, OrderRecord } from '../src/domain/orders.js'
import { Order } from '../src/schemas/order.js'
import { POSTGRES_MIGRATIONS, SCHEMA_MIGRATIONS_TABLE } from '../src/store/postgres/migrations.js'
import { PostgresStore } from '../src/store/postgres/postgres-store.js'
import { MAX_STALENESS_MS, RENEW_AFTER_MS } from '../src/store/postgres/version-watcher.js'
import { StoreUnavailableError } from '../src/store/store.js'
import { listedOrders, within } from './support/harness.js'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './support/postgres.js'

const skip = await postgresSkipReason()

const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)
const VERSION_CHANNEL = 'petstore_orders_data_version'
/** Long enough for what is awaited here (a listener up or lost, a notification) on a loaded machine. */
const SETTLE_MS = 10_000
const ALL_VERSIONS = POSTGRES_MIGRATIONS.map((migration) => migration.version)
const LATEST = ALL_VERSIONS.at(-1)!

// The route's response schema is an array of Order; fast-json-stringify is what Fastify compiles it with.
const serializeOrders = fastJson(Type.Array(Order) as object, {}) as (orders: unknown[]) => string

function order(id: bigint, fields: Partial<OrderRecord> = {}): OrderRecord {
  return { id, petId: 7n, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z', complete: false, status: 'pending', ...fields }
}

async function* from<T>(items: Iterable<T>): AsyncIterable<T> {
  yield* items
}

async function jsonPages(store: PostgresStore): Promise<string[]> {
  const pages: string[] = []
  for await (const page of store.orders.streamJson()) pages.push(page.toString())
  return pages
}

async function rejectsUnavailable(promise: Promise<unknown>, what: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof StoreUnavailableError, `${what}: expected StoreUnavailableError, got ${String(error)}`)
    return true
  })
}

/** A port nothing listens on. */
async function unusedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

describe('PostgresStore', { skip }, () => {
  let db: TestDatabase
  let store: PostgresStore
  let admin: pg.Client

  /** Runs SQL in the test database on a connection of its own (not the store's). */
  async function sql<R extends pg.QueryResultRow>(text: string, params?: unknown[]): Promise<R[]> {
    return (await admin.query<R>(text, params)).rows
  }

  /** The store's sessions in the test database (its pool sets application_name). */
  function storeSessions() {
    return sql<{ pid: number; state: string | null }>(
      `SELECT pid, state FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'petstore-orders'`,
    )
  }

  /** Ends every connection of the store's pool, as an operator or a failover would. */
  async function terminateStoreSessions(): Promise<number[]> {
    const rows = await sql<{ pid: number; terminated: boolean }>(
      `SELECT pid, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = 'petstore-orders'`,
    )
    return rows.filter((r) => r.terminated).map((r) => r.pid)
  }

  /** pg_terminate_backend only signals: waits until those backends have exited. */
  async function gone(pids: number[]): Promise<void> {
    for (let i = 0; i < 100; i++) {
      const [row] = await sql<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1)', [pids])
      if (row?.n === 0) return
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    assert.fail(`backends ${pids.join(', ')} did not exit`)
  }

  before(async () => {
    db = await createTestDatabase()
    store = new PostgresStore(db.url, { poolSize: 5 })
    admin = new pg.Client({ connectionString: db.url })
    await admin.connect()
    // What the tests below share: 25,000 orders (several MB of list) and one revoked key.
    await store.migrate()
    await store.orders.import(from(Array.from({ length: 25_000 }, (_, i) => order(100_000n + BigInt(i)))))
    await store.apiKeys.create({ name: 'a', hash: 'h'.repeat(64), displayPrefix: 'pso_AAAAAAAA', scopes: ['orders:read'], expiresAt: null })
    await store.apiKeys.revoke('pso_AAAAAAAA')
  })

  after(async () => {
    await store?.close()
    await admin?.end()
    await db?.drop()
  })

  it('four instances migrating one fresh database at the same moment all succeed, each version applied once', async () => {
    const fresh = await createTestDatabase()
    const stores = Array.from({ length: 4 }, () => new PostgresStore(fresh.url, { poolSize: 1 }))
    try {
      const applied = await Promise.all(stores.map((s) => s.migrate()))
      assert.deepEqual(applied.flat().sort((a, b) => a - b), ALL_VERSIONS)
      const client = new pg.Client({ connectionString: fresh.url })
      await client.connect()
      try {
        const { rows } = await client.query('SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version ORDER BY version')
        assert.deepEqual(rows, ALL_VERSIONS.map((version) => ({ version, n: 1 })))
        // A recreated database does not start where another one did (1 chance in 2^48).
        const versions = await Promise.all([client, admin].map(async (c) => (await c.query('SELECT version::text FROM data_version')).rows[0].version as string))
        assert.notEqual(versions[0], versions[1])
        // A schema newer than the code is refused.
        await client.query(`INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')`)
        await assert.rejects(stores[0]!.migrate(), new RegExp(`schema is at version 999, newer than this build knows \\(${LATEST}\\)`))
      } finally {
        await client.end()
      }
    } finally {
      await Promise.all(stores.map((s) => s.close()))
      await fresh.drop()
    }
  })

  it('upgrades a database at version 1 that already holds orders: migration 2 writes every order\'s list JSON', async () => {
    const old = await createTestDatabase()
    const client = new pg.Client({ connectionString: old.url })
    await client.connect()
    const upgraded = new PostgresStore(old.url, { poolSize: 2 })
    try {
      const first = POSTGRES_MIGRATIONS[0]!
      await client.query(`${SCHEMA_MIGRATIONS_TABLE}; ${first.sql}`)
      await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [first.version, first.name])
      await client.query(`INSERT INTO orders (id, pet_id, quantity, ship_date, complete, status) VALUES
        (${INT64_MIN}, ${INT64_MAX}, 3, '2026-11-25 10:00:00.5+00', false, 'pending'),
        (-1, NULL, NULL, NULL, true, 'shipped'),
        (5, 7, 1, '2026-11-25 23:30:00-05', false, 'cancelled')`)
      assert.deepEqual(await upgraded.migrate(), ALL_VERSIONS.slice(1))
      assert.equal(
        `[${(await jsonPages(upgraded)).join(',')}]`,
        `[{"id":${INT64_MIN},"petId":${INT64_MAX},"quantity":3,"shipDate":"2026-11-25T10:00:00.500Z","complete":false},{"id":-1,"complete":true}]`,
      )
      const { rows } = await client.query<{ list_json: string }>('SELECT list_json FROM orders WHERE id = 5')
      assert.equal(rows[0]!.list_json, '{"id":5,"petId":7,"quantity":1,"shipDate":"2026-11-26T04:30:00.000Z","complete":false}')
    } finally {
      await upgraded.close()
      await client.end()
      await old.drop()
    }
  })

  it('has the planner statistics of orders brought up to date once an import commits (VACUUM ANALYZE)', async () => {
    const [before] = await sql<{ n: number }>('SELECT count(*)::int AS n FROM orders')
    await store.orders.import(from(Array.from({ length: 10 }, (_, i) => order(900_000n + BigInt(i)))))
    // A table this small is analyzed whole: the estimate is the count.
    const [after] = await sql<{ reltuples: number; allVisible: number }>(
      `SELECT reltuples::int AS reltuples, relallvisible AS "allVisible" FROM pg_class WHERE oid = 'orders'::regclass`,
    )
    assert.equal(after!.reltuples, before!.n + 10)
    assert.ok(after!.allVisible > 0, 'the visibility map is set: index-only scans need not visit the table')
  })

  it('reads shipDate back as Date#toISOString() writes it', async () => {
    await store.orders.import(from([order(50n, { shipDate: '2027-01-02T03:04:05.678Z' }), order(51n, { shipDate: '2027-01-02T03:04:05Z' })]))
    const listed = await listedOrders(store)
    assert.equal(listed.find((o) => o.id === 50n)?.shipDate, '2027-01-02T03:04:05.678Z')
    assert.equal(listed.find((o) => o.id === 51n)?.shipDate, '2027-01-02T03:04:05.000Z')
  })

  it('does not hold a batch up for orders another transaction has locked: those wait on their own', async () => {
    await store.orders.import(from([order(340n), order(341n), order(342n), order(343n)]))
    const start = await store.orders.dataVersion()
    const other = new pg.Client({ connectionString: db.url })
    await other.connect()
    try {
      await other.query('BEGIN')
      await other.query('SELECT 1 FROM orders WHERE id IN (341, 343) FOR UPDATE')
      const [a, b, c, d] = [340n, 341n, 342n, 343n].map((id) => store.orders.cancel(id, null, id === 343n ? 'fraudulent' : null)) as [
        Promise<CancelResult>, Promise<CancelResult>, Promise<CancelResult>, Promise<CancelResult>,
      ]
      assert.deepEqual((await Promise.all([a, c])).map((r) => r.outcome), ['cancelled', 'cancelled'])
      let settled = false
      void Promise.allSettled([b, d]).then(() => (settled = true))
      await sleep(200)
      assert.equal(settled, false, 'the cancels of the locked orders wait for the lock')
      await other.query(`UPDATE orders SET status = 'shipped' WHERE id = 341`)
      await other.query('COMMIT')
      const [shipped, alone] = await Promise.all([b, d])
      assert.deepEqual([shipped.outcome, alone.outcome], ['already_shipped', 'cancelled'])
      // Cancelled on its own, it is returned as the batch would return it: as getOrder reads it, with its reason.
      if (alone.outcome !== 'cancelled') return assert.fail(alone.outcome)
      assert.equal(alone.order.cancellationReason, 'fraudulent')
      assert.deepEqual(alone.order, await store.orders.find(343n))
    } finally {
      await other.end()
    }
    assert.equal(await store.orders.dataVersion(), start + 2n) // the batch, then the one cancelled alone
  })

  it('serves dataVersion from memory while it listens: no round trip, even with the pool exhausted', async () => {
    const single = new PostgresStore(db.url, { poolSize: 1, connectionTimeoutMillis: 1000 })
    try {
      const version = await single.orders.dataVersion()
      await within(SETTLE_MS, 'listener up', () => single.versionListenerPid() !== undefined)
      // The only pooled connection is held by an open stream: a read would wait for it.
      const stream = single.orders.streamJson()[Symbol.asyncIterator]()
      await stream.next()
      // Counted, not timed: no query on any connection but the listener's re-read, started at most
      // once every RENEW_AFTER_MS while calls keep coming (a read on the pool would wait for the one
      // connection the stream holds, and fail after connectionTimeoutMillis).
      const query = pg.Client.prototype.query
      let queries = 0
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        queries++
        return (query as (...args: unknown[]) => unknown).apply(this, args)
      } as typeof query
      try {
        const started = performance.now()
        for (let i = 0; i < 1000; i++) assert.equal(await single.orders.dataVersion(), version)
        const elapsed = performance.now() - started
        assert.ok(queries <= 1 + Math.floor(elapsed / RENEW_AFTER_MS), `${queries} queries for 1000 calls in ${Math.round(elapsed)} ms`)
      } finally {
        pg.Client.prototype.query = query
        await stream.return?.(undefined)
      }
    } finally {
      await single.close()
    }
  })

  it('delivers webhooks on connections of their own: an exhausted API pool does not hold them up', async () => {
    const single = new PostgresStore(db.url, { poolSize: 1, connectionTimeoutMillis: 1000 })
    try {
      await single.orders.import(from([order(9_001n)]))
      // The only pooled connection is held by an open stream: anything on that pool would wait 1 s and fail.
      const stream = single.orders.streamJson()[Symbol.asyncIterator]()
      await stream.next()
      try {
        const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
        const endpoint = await single.webhooks.create({ url: 'https://hooks.example/a', eventTypes: ['order.cancelled'], description: null, secret }, 100)
        assert.notEqual(endpoint, 'too_many')
        await sql(`UPDATE webhook_endpoints SET position = position - 1`)
        const [lease] = await single.webhooks.lease('owner', new Date(), 60_000, 10)
        assert.ok(lease !== undefined)
        const next = await single.webhooks.next(lease, 10)
        assert.notEqual(next, 'expired')
        const attempt = { eventId: lease.endpoint.position + 1n, attemptedAt: new Date().toISOString(), status: 200, error: null, durationMs: 1 }
        assert.equal(await single.webhooks.advance(lease, lease.endpoint.position + 1n, attempt), true)
        await single.webhooks.release(lease)
        assert.equal(single.poolStats().waiting, 0)
      } finally {
        await stream.return?.(undefined)
      }
      await sql('DELETE FROM webhook_endpoints')
    } finally {
      await single.close()
    }
  })

  it("sees others' changes at once when notified, and one that is not notified within MAX_STALENESS_MS", async () => {
    // A database of its own: the made-up notification below must reach no other test's store.
    const fresh = await createTestDatabase()
    const watcher = new PostgresStore(fresh.url, { poolSize: 2 })
    const other = new PostgresStore(fresh.url, { poolSize: 2 })
    const freshSql = async (text: string, params?: unknown[]) => {
      const client = new pg.Client({ connectionString: fresh.url })
      await client.connect()
      try {
        await client.query(text, params)
      } finally {
        await client.end()
      }
    }
    try {
      await watcher.migrate()
      const start = await watcher.orders.dataVersion()
      await within(SETTLE_MS, 'listener up', () => watcher.versionListenerPid() !== undefined)
      // Another instance's change: its NOTIFY arrives with the COMMIT.
      assert.equal(await other.orders.import(from([order(350n)])), 1)
      const notified = await within(SETTLE_MS, 'change notified', async () => (await watcher.orders.dataVersion()) === start + 1n)
      console.log(`# seen after ${notified.toFixed(0)} ms (notified)`)
      // A change made by hand, without NOTIFY: the periodic re-read finds it. A version served from
      // memory comes from a read started at most MAX_STALENESS_MS ago, so once that long has passed
      // since the commit, every call sees it (a lower bound of waiting: no speed is asked for).
      await freshSql('UPDATE data_version SET version = version + 1')
      const committed = performance.now()
      while (performance.now() - committed <= MAX_STALENESS_MS) await sleep(MAX_STALENESS_MS / 10)
      assert.equal(await watcher.orders.dataVersion(), start + 2n, 'the change re-read')
      // The notification alone carries the version: this one exists only in the payload.
      await freshSql('SELECT pg_notify($1, $2)', [VERSION_CHANNEL, String(start + 1000n)])
      // No read could find it (the table holds start + 2): only the listener can have applied it.
      await within(SETTLE_MS, 'payload applied', async () => (await watcher.orders.dataVersion()) === start + 1000n)
    } finally {
      await Promise.all([watcher.close(), other.close()])
      await fresh.drop()
    }
  })

  it('reads the version from the database while its listener is down, and listens again', async () => {
    const start = await store.orders.dataVersion()
    await within(SETTLE_MS, 'listener up', () => store.versionListenerPid() !== undefined)
    const pid = store.versionListenerPid()!
    await sql('SELECT pg_terminate_backend($1)', [pid])
    await within(SETTLE_MS, 'listener loss noticed', () => store.versionListenerPid() === undefined)
    // A change that is never notified is read at once: without a listener every call reads.
    await sql('UPDATE data_version SET version = version + 1')
    assert.equal(await store.orders.dataVersion(), start + 1n)
    await within(SETTLE_MS, 'listening again', async () => {
      await store.orders.dataVersion()
      return store.versionListenerPid() !== undefined
    })
    assert.notEqual(store.versionListenerPid(), pid)
    // A notification ahead of the table (which holds start + 1): only the listener can make it seen.
    await sql('SELECT pg_notify($1, $2)', [VERSION_CHANNEL, String(start + 2n)])
    await within(SETTLE_MS, 'notified again', async () => (await store.orders.dataVersion()) === start + 2n)
    await sql('UPDATE data_version SET version = version + 1') // the table catches up: start + 2
  })

  it('lists shipDate to the millisecond, as Date#toISOString() writes it, whatever precision is stored', async () => {
    await store.orders.import(from([order(701n)]))
    // Microseconds (the import never writes them) are dropped.
    await sql(`UPDATE orders SET ship_date = '2027-01-02 03:04:05.678999+00' WHERE id = 701`)
    const listed = await listedOrders(store)
    assert.equal(listed.find((o) => o.id === 701n)?.shipDate, '2027-01-02T03:04:05.678Z')
  })

  it('streamJson: an empty list, and a list of one order; a finished list returns its client', async () => {
    const fresh = await createTestDatabase()
    const small = new PostgresStore(fresh.url, { poolSize: 2 })
    try {
      await small.migrate()
      assert.deepEqual(await jsonPages(small), [])
      await small.orders.import(from([order(-5n, { status: 'cancelled' }), order(7n, { petId: null })]))
      assert.deepEqual(await jsonPages(small), [serializeOrders(await listedOrders(small)).slice(1, -1)])
      assert.equal(small.poolStats().idle, small.poolStats().total, 'a finished list returns its client')
    } finally {
      await small.close()
      await fresh.drop()
    }
  })

  it('streamJson: breaking out mid-COPY closes its connection', async () => {
    for await (const page of store.orders.streamJson()) {
      assert.ok(page.toString().startsWith('{"id":'))
      break // the COPY is still sending
    }
    // The connection, mid-COPY, is closed rather than returned; its backend ends the statement.
    const stats = store.poolStats()
    assert.equal(stats.idle, stats.total)
    await within(SETTLE_MS, 'the COPY ended', async () => (await storeSessions()).every((s) => s.state === 'idle'))
  })

  it('answers StoreUnavailableError when nothing listens at the address', async () => {
    const port = await unusedPort()
    const down = new PostgresStore(`postgres://postgres@127.0.0.1:${port}/test`, { poolSize: 2 })
    try {
      await rejectsUnavailable(down.ping(), 'ping')
      await rejectsUnavailable(down.migrate(), 'migrate')
      await rejectsUnavailable(down.orders.dataVersion(), 'dataVersion')
      await rejectsUnavailable(down.orders.cancel(1n, null), 'cancelOrder')
      await rejectsUnavailable(down.apiKeys.findByHash('x'), 'findApiKeyByHash')
      await rejectsUnavailable(down.orders.import(from([order(1n)])), 'importOrders')
      await rejectsUnavailable(jsonPages(down), 'streamOrdersJson')
    } finally {
      await down.close()
      await down.close() // idempotent
    }
  })

  it('answers StoreUnavailableError when the server does not answer in time', async () => {
    // Accepts TCP connections and never speaks: the connection timeout decides.
    const sockets = new Set<Socket>()
    const server: Server = createServer((socket) => {
      sockets.add(socket)
      socket.on('error', () => {})
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }
    const CONNECTION_TIMEOUT_MS = 300
    const silent = new PostgresStore(`postgres://postgres@127.0.0.1:${port}/test`, { poolSize: 1, connectionTimeoutMillis: CONNECTION_TIMEOUT_MS })
    try {
      const error = await silent.ping().then(
        () => assert.fail('ping: expected StoreUnavailableError'),
        (error: unknown) => error,
      )
      assert.ok(error instanceof StoreUnavailableError, `ping: expected StoreUnavailableError, got ${String(error)}`)
      // Given up on by the connection timeout (the pool's own error, kept as the cause), not by anything else.
      const causes: string[] = []
      for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) causes.push(cause.message)
      assert.ok(causes.some((message) => /connection timeout|timeout expired/.test(message)), causes.join(' <- '))
    } finally {
      await silent.close()
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('answers StoreUnavailableError while the database is down, and recovers by itself when it is back', async () => {
    // A TCP proxy in front of the server stands for the database host: stopping it drops every
    // connection and refuses new ones, as a stopped server would.
    const target = new URL(db.url)
    const sockets = new Set<Socket>()
    const proxy = createServer((client) => {
      const upstream = connect(Number(target.port || 5432), target.hostname)
      for (const socket of [client, upstream]) {
        sockets.add(socket)
        socket.on('error', () => {})
        socket.on('close', () => sockets.delete(socket))
      }
      client.pipe(upstream).pipe(client)
    })
    const listen = (port: number) => new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve))
    const stop = async () => {
      const closed = new Promise((resolve) => proxy.close(resolve))
      for (const socket of sockets) socket.destroy()
      await closed
    }
    await listen(0)
    const port = (proxy.address() as { port: number }).port
    const url = new URL(db.url)
    url.host = `127.0.0.1:${port}`
    const behind = new PostgresStore(url.toString(), { poolSize: 3 })
    try {
      await Promise.all([behind.ping(), behind.orders.dataVersion(), behind.pets.find(1n)])
      await within(SETTLE_MS, 'listener up', () => behind.versionListenerPid() !== undefined)
      await stop()
      await rejectsUnavailable(behind.ping(), 'ping while down')
      await rejectsUnavailable(behind.orders.cancel(1n, null), 'cancelOrder while down')
      await rejectsUnavailable(jsonPages(behind), 'streamOrdersJson while down')
      // The listener's connection is gone too: the version is read, and that fails.
      await within(SETTLE_MS, 'dataVersion unavailable', () => behind.orders.dataVersion().then(() => false, (error) => error instanceof StoreUnavailableError))
      await rejectsUnavailable(behind.orders.dataVersion(), 'dataVersion while down')
      await listen(port)
      await behind.ping()
      assert.equal((await behind.orders.cancel(999_999n, null)).outcome, 'not_found')
      assert.ok((await listedOrders(behind)).length > 1000)
      assert.ok((await jsonPages(behind)).length > 0)
      await behind.orders.dataVersion()
    } finally {
      await behind.close()
      if (proxy.listening) await stop()
    }
  })

  it('answers StoreUnavailableError when its connections are terminated, and recovers by itself', async () => {
    // Enough orders (~18 MB of COPY output) that the list cannot have reached this process's socket
    // buffers whole before its backend is terminated: a list that had arrived in full is complete,
    // and with the ~1,000 orders of the suite that happened once in a full run.
    await store.orders.import(from(Array.from({ length: 200_000 }, (_, i) => order(10_000_000n + BigInt(i)))))
    await store.ping()
    const pages = store.orders.streamJson()[Symbol.asyncIterator]()
    assert.ok((await pages.next()).value)
    let killed: number[] = []
    try {
      killed = await terminateStoreSessions()
      assert.ok(killed.length >= 2)
      // The open list's connection is gone: the list fails.
      const drain = async (iterator: AsyncIterator<unknown>) => {
        while (!(await iterator.next()).done);
      }
      await rejectsUnavailable(drain(pages), 'streamOrdersJson after terminate')
    } finally {
      await pages.return?.(undefined)
    }

    // No restart: reads go through at once (a read that meets a dead pooled connection is retried
    // on a new one) ...
    await store.ping()
    const [row] = await sql<{ version: string }>('SELECT version::text FROM data_version')
    assert.equal(await store.orders.dataVersion(), BigInt(row!.version))
    // ... and once the terminated backends are gone, the pool has dropped their connections.
    await gone(killed)
    await store.orders.import(from([order(600n)]))
    assert.equal((await store.orders.cancel(600n, null)).outcome, 'cancelled')
    assert.ok((await listedOrders(store)).length > 1000)

    // Idle pooled connections terminated between two calls: reads still succeed right away.
    await Promise.all([store.ping(), store.ping(), store.orders.dataVersion()])
    const stats = store.poolStats()
    assert.ok(stats.idle >= 2)
    killed = await terminateStoreSessions()
    assert.ok(killed.length >= stats.total) // and the version listener's, if it was up
    assert.ok((await store.apiKeys.findByHash('h'.repeat(64)))?.revokedAt instanceof Date)
    assert.ok((await jsonPages(store)).length > 0)
    await gone(killed)
    assert.equal((await store.orders.ship(600n)).outcome, 'cancelled')
  })
})

// Needs no PostgreSQL server: it is about the one that is not there.
describe('PostgresStore, server unreachable', () => {
  it('names the host and port in its error, never the password', async () => {
    const port = await unusedPort()
    const down = new PostgresStore(`postgres://petstore:s3cret-pw@127.0.0.1:${port}/test`, { poolSize: 1 })
    try {
      for (const attempt of [() => down.ping(), () => down.orders.cancel(1n, null), () => down.apiKeys.list()]) {
        await assert.rejects(attempt(), (error: unknown) => {
          assert.ok(error instanceof StoreUnavailableError, String(error))
          assert.match(error.message, new RegExp(`^PostgreSQL at 127\\.0\\.0\\.1:${port} is unavailable \\(.+\\)$`))
          assert.ok(!error.message.includes('s3cret-pw'))
          return true
        })
      }
    } finally {
      await down.close()
    }
  })
})
