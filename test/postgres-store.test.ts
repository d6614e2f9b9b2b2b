import assert from 'node:assert/strict'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import fastJson from 'fast-json-stringify'
import pg from 'pg'
import Type from 'typebox'
import type { CancelOutcome, OrderRecord } from '../src/domain/orders.js'
import { Order } from '../src/schemas/order.js'
import type { Pet } from '../src/schemas/pet.js'
import { POSTGRES_MIGRATIONS, SCHEMA_MIGRATIONS_TABLE } from '../src/store/postgres/migrations.js'
import { PostgresStore } from '../src/store/postgres/postgres-store.js'
import { ImportConflictError, StoreUnavailableError } from '../src/store/store.js'
import { within } from './support/harness.js'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './support/postgres.js'

const skip = await postgresSkipReason()

const TWO_53 = 2n ** 53n
const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)
const VERSION_CHANNEL = 'petstore_orders_data_version'
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

async function listAll(store: PostgresStore, batchSize?: number) {
  const all = []
  for await (const batch of store.streamOrders(batchSize)) for (const order of batch) all.push(order) // a batch can outgrow a spread's arguments
  return all
}

async function jsonPages(store: PostgresStore): Promise<string[]> {
  const pages: string[] = []
  for await (const page of store.streamOrdersJson()) pages.push(page.toString())
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
  })

  after(async () => {
    await store?.close()
    await admin?.end()
    await db?.drop()
  })

  it('migrates once: the second run applies nothing; data_version starts at a random value below 2^48', async () => {
    assert.deepEqual(await store.migrate(), ALL_VERSIONS)
    assert.deepEqual(await store.migrate(), [])
    const [row] = await sql<{ version: string }>('SELECT version::text FROM data_version')
    const version = BigInt(row!.version)
    assert.ok(version >= 0n && version < 2n ** 48n, String(version))
    assert.equal(await store.dataVersion(), version)
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

  it('round-trips int64 ids and petIds at 2^53, 2^53+1 and 2^63-1 exactly', async () => {
    const ids = [TWO_53, TWO_53 + 1n, INT64_MAX]
    const records = ids.map((id, i) =>
      order(id, { petId: ids[2 - i]!, quantity: i + 1, shipDate: i === 1 ? null : '2026-11-25T10:00:00.000Z', complete: i === 2, status: i === 2 ? 'shipped' : 'pending' }),
    )
    assert.equal(await store.importOrders(from(records)), 3)
    const listed = await listAll(store)
    assert.deepEqual(listed, [
      { id: TWO_53, petId: INT64_MAX, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z', complete: false },
      { id: TWO_53 + 1n, petId: TWO_53 + 1n, quantity: 2, complete: false },
      { id: INT64_MAX, petId: TWO_53, quantity: 3, shipDate: '2026-11-25T10:00:00.000Z', complete: true },
    ])
    assert.equal(typeof listed[0]!.id, 'bigint')

    await store.importPets(from<Pet>([{ id: INT64_MAX, name: 'Max', tag: 'dog' }, { id: TWO_53 + 1n, name: 'Odd' }]))
    assert.deepEqual(await store.findPet(INT64_MAX), { id: INT64_MAX, name: 'Max', tag: 'dog' })
    assert.deepEqual(await store.findPet(TWO_53 + 1n), { id: TWO_53 + 1n, name: 'Odd' })
    assert.equal(await store.findPet(TWO_53), undefined)
  })

  it('imports text exactly, whatever characters it holds', async () => {
    const names = ['a "quoted" \\ back\\slash, {brace}', 'NULL', '', 'Ünïcødé 🐕', "it's\nmultiline"]
    await store.importPets(from<Pet>(names.map((name, i) => ({ id: 1000n + BigInt(i), name, tag: name }))))
    for (const [i, name] of names.entries()) {
      assert.deepEqual(await store.findPet(1000n + BigInt(i)), { id: 1000n + BigInt(i), name, tag: name })
    }
  })

  it('reads shipDate back as Date#toISOString() writes it', async () => {
    await store.importOrders(from([order(50n, { shipDate: '2027-01-02T03:04:05.678Z' }), order(51n, { shipDate: '2027-01-02T03:04:05Z' })]))
    const listed = await listAll(store)
    assert.equal(listed.find((o) => o.id === 50n)?.shipDate, '2027-01-02T03:04:05.678Z')
    assert.equal(listed.find((o) => o.id === 51n)?.shipDate, '2027-01-02T03:04:05.000Z')
  })

  it('cancels pending orders only, bumping data_version exactly when it cancels', async () => {
    await store.importOrders(from([order(100n), order(101n, { status: 'shipped', complete: true }), order(102n, { status: 'cancelled' })]))
    const start = await store.dataVersion()

    assert.equal(await store.cancelOrder(100n, 42n), 'cancelled')
    assert.equal(await store.dataVersion(), start + 1n)
    const [row] = await sql<{ status: string; cancelled_at: Date | null; cancelled_by_key: string }>(
      'SELECT status, cancelled_at, cancelled_by_key FROM orders WHERE id = 100',
    )
    assert.equal(row?.status, 'cancelled')
    assert.ok(row?.cancelled_at instanceof Date)
    assert.equal(row?.cancelled_by_key, '42')

    assert.equal(await store.cancelOrder(100n, 42n), 'not_found') // already cancelled
    assert.equal(await store.cancelOrder(101n, null), 'already_shipped')
    assert.equal(await store.cancelOrder(102n, null), 'not_found') // imported as cancelled
    assert.equal(await store.cancelOrder(999_999n, null), 'not_found')
    assert.equal(await store.cancelOrder(INT64_MAX - 1n, null), 'not_found')
    assert.equal(await store.dataVersion(), start + 1n)

    const ids = (await listAll(store)).map((o) => o.id)
    assert.ok(!ids.includes(100n) && !ids.includes(102n) && ids.includes(101n))
  })

  it('ships pending orders only', async () => {
    await store.importOrders(from([order(200n), order(201n, { status: 'cancelled' })]))
    const start = await store.dataVersion()
    assert.equal(await store.shipOrder(200n), 'shipped')
    assert.equal(await store.dataVersion(), start + 1n)
    assert.equal(await store.shipOrder(200n), 'already_shipped')
    assert.equal(await store.shipOrder(201n), 'cancelled')
    assert.equal(await store.shipOrder(202n), 'not_found')
    assert.equal(await store.dataVersion(), start + 1n)
    assert.equal(await store.cancelOrder(200n, null), 'already_shipped')
  })

  it('of 50 concurrent cancels of one pending order, exactly one cancels', async () => {
    await store.importOrders(from([order(300n)]))
    const start = await store.dataVersion()
    const outcomes = await Promise.all(Array.from({ length: 50 }, (_, i) => store.cancelOrder(300n, BigInt(i))))
    assert.equal(outcomes.filter((o) => o === 'cancelled').length, 1)
    assert.equal(outcomes.filter((o) => o === 'not_found').length, 49)
    assert.equal(await store.dataVersion(), start + 1n)
  })

  it('group-commits concurrent cancels: one transaction, one version bump, each its own exact outcome', async () => {
    await store.importOrders(
      from([order(310n), order(311n), order(312n), order(313n, { status: 'shipped', complete: true }), order(314n, { status: 'cancelled' })]),
    )
    const start = await store.dataVersion()
    const ids = [310n, 311n, 313n, 314n, 999_998n, 310n, 312n, 313n, 311n, 312n]
    const outcomes = await Promise.all(ids.map((id, i) => store.cancelOrder(id, BigInt(i))))
    const expected: CancelOutcome[] = [
      'cancelled', 'cancelled', 'already_shipped', 'not_found', 'not_found',
      'not_found', 'cancelled', 'already_shipped', 'not_found', 'not_found',
    ]
    assert.deepEqual(outcomes, expected)
    assert.equal(await store.dataVersion(), start + 1n) // one batch: one bump
    // Of several cancels of one order, the first decided: its key is the one recorded.
    assert.deepEqual(await sql(`SELECT id::text, cancelled_by_key::text AS key FROM orders WHERE id IN (310, 311, 312) ORDER BY id`), [
      { id: '310', key: '0' },
      { id: '311', key: '1' },
      { id: '312', key: '6' },
    ])
  })

  it('fails a whole batch exactly: every cancel in it is rejected and none of them commits', async () => {
    const ids = Array.from({ length: 20 }, (_, i) => 320n + BigInt(i))
    await store.importOrders(from(ids.map((id) => order(id))))
    const start = await store.dataVersion()
    // One order the database refuses to change makes the batch's statement fail.
    await sql(`CREATE FUNCTION refuse_331() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN IF NEW.id = 331 THEN RAISE EXCEPTION 'refused 331'; END IF; RETURN NEW; END $$`)
    await sql('CREATE TRIGGER refuse_331 BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION refuse_331()')
    let results: PromiseSettledResult<CancelOutcome>[]
    try {
      results = await Promise.allSettled(ids.map((id) => store.cancelOrder(id, null)))
    } finally {
      await sql('DROP TRIGGER refuse_331 ON orders')
      await sql('DROP FUNCTION refuse_331()')
    }
    for (const result of results) {
      assert.equal(result.status, 'rejected')
      assert.match(String((result as PromiseRejectedResult).reason), /refused 331/)
    }
    const [row] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM orders WHERE id BETWEEN 320 AND 339 AND status = 'pending'`)
    assert.equal(row?.n, 20, 'no cancel of the failed batch committed')
    assert.equal(await store.dataVersion(), start)
    // And each can be cancelled now, exactly once.
    assert.deepEqual(await Promise.all(ids.map((id) => store.cancelOrder(id, null))), ids.map(() => 'cancelled'))
    assert.equal(await store.dataVersion(), start + 1n)
  })

  it('does not hold a batch up for orders another transaction has locked: those wait on their own', async () => {
    await store.importOrders(from([order(340n), order(341n), order(342n), order(343n)]))
    const start = await store.dataVersion()
    const other = new pg.Client({ connectionString: db.url })
    await other.connect()
    try {
      await other.query('BEGIN')
      await other.query('SELECT 1 FROM orders WHERE id IN (341, 343) FOR UPDATE')
      const [a, b, c, d] = [340n, 341n, 342n, 343n].map((id) => store.cancelOrder(id, null))
      assert.deepEqual(await Promise.all([a, c]), ['cancelled', 'cancelled'])
      let settled = false
      void Promise.allSettled([b, d]).then(() => (settled = true))
      await sleep(200)
      assert.equal(settled, false, 'the cancels of the locked orders wait for the lock')
      await other.query(`UPDATE orders SET status = 'shipped' WHERE id = 341`)
      await other.query('COMMIT')
      assert.deepEqual(await Promise.all([b, d]), ['already_shipped', 'cancelled'])
    } finally {
      await other.end()
    }
    assert.equal(await store.dataVersion(), start + 2n) // the batch, then the one cancelled alone
  })

  it('serves dataVersion from memory while it listens: no round trip, even with the pool exhausted', async () => {
    const single = new PostgresStore(db.url, { poolSize: 1, connectionTimeoutMillis: 1000 })
    try {
      const version = await single.dataVersion()
      await within(5000, 'listener up', () => single.versionListenerPid() !== undefined)
      // The only pooled connection is held by an open stream: a read would wait for it.
      const stream = single.streamOrders(10)[Symbol.asyncIterator]()
      await stream.next()
      try {
        const started = performance.now()
        for (let i = 0; i < 1000; i++) assert.equal(await single.dataVersion(), version)
        assert.ok(performance.now() - started < 300)
      } finally {
        await stream.return?.(undefined)
      }
    } finally {
      await single.close()
    }
  })

  it("sees others' changes at once when notified, and one that is not notified within 1 s", async () => {
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
      const start = await watcher.dataVersion()
      await within(5000, 'listener up', () => watcher.versionListenerPid() !== undefined)
      // Another instance's change: its NOTIFY arrives with the COMMIT.
      assert.equal(await other.importOrders(from([order(350n)])), 1)
      const notified = await within(1000, 'change notified', async () => (await watcher.dataVersion()) === start + 1n)
      // A change made by hand, without NOTIFY: the periodic re-read finds it.
      await freshSql('UPDATE data_version SET version = version + 1')
      const reread = await within(1500, 'change re-read', async () => (await watcher.dataVersion()) === start + 2n)
      console.log(`# seen after ${notified.toFixed(0)} ms (notified), ${reread.toFixed(0)} ms (re-read)`)
      // The notification alone carries the version: this one exists only in the payload.
      await freshSql('SELECT pg_notify($1, $2)', [VERSION_CHANNEL, String(start + 1000n)])
      await within(500, 'payload applied', async () => (await watcher.dataVersion()) === start + 1000n)
    } finally {
      await Promise.all([watcher.close(), other.close()])
      await fresh.drop()
    }
  })

  it('reads the version from the database while its listener is down, and listens again', async () => {
    const start = await store.dataVersion()
    await within(5000, 'listener up', () => store.versionListenerPid() !== undefined)
    const pid = store.versionListenerPid()!
    await sql('SELECT pg_terminate_backend($1)', [pid])
    await within(2000, 'listener loss noticed', () => store.versionListenerPid() === undefined)
    // A change that is never notified is read at once: without a listener every call reads.
    await sql('UPDATE data_version SET version = version + 1')
    assert.equal(await store.dataVersion(), start + 1n)
    await within(5000, 'listening again', async () => {
      await store.dataVersion()
      return store.versionListenerPid() !== undefined
    })
    assert.notEqual(store.versionListenerPid(), pid)
    // A bump that notifies, as the store's own do.
    await sql('UPDATE data_version SET version = version + 1 RETURNING pg_notify($1, version::text)', [VERSION_CHANNEL])
    await within(500, 'notified again', async () => (await store.dataVersion()) === start + 2n)
  })

  it('imports all or nothing: an input failing midway rolls back and its error is rethrown as is', async () => {
    const before = await listAll(store)
    const version = await store.dataVersion()
    const boom = new Error('read error at line 12001')
    async function* failing(): AsyncIterable<OrderRecord> {
      for (let i = 0; i < 12_000; i++) yield order(10_000n + BigInt(i))
      throw boom
    }
    await assert.rejects(store.importOrders(failing()), (error) => error === boom)
    assert.deepEqual(await listAll(store), before)
    assert.equal(await store.dataVersion(), version)
    assert.deepEqual(await storeSessions().then((s) => s.filter((x) => x.state === 'idle in transaction')), [])
  })

  it('refuses to revive a cancelled order or to move a shipped one back, naming the first such record', async () => {
    await store.importOrders(from([order(400n, { status: 'cancelled' }), order(401n, { status: 'shipped' })]))
    const before = await listAll(store)
    const version = await store.dataVersion()

    await assert.rejects(
      store.importOrders(from([order(402n), order(400n)])),
      (error: unknown) => error instanceof ImportConflictError && error.message === 'order 400 is cancelled and cannot become pending',
    )
    // Within one batch, the first offending record in input order is reported.
    const many = Array.from({ length: 3000 }, (_, i) => order(20_000n + BigInt(i)))
    many.splice(1000, 0, order(401n, { status: 'cancelled' }))
    many.splice(2000, 0, order(400n, { status: 'shipped' }))
    await assert.rejects(
      store.importOrders(from(many)),
      (error: unknown) => error instanceof ImportConflictError && error.message === 'order 401 is shipped and cannot become cancelled',
    )
    // A conflict is reported before a later failure of the input, as a record-by-record import would.
    async function* conflictThenFailure(): AsyncIterable<OrderRecord> {
      yield order(400n, { status: 'shipped' })
      throw new Error('input broke')
    }
    await assert.rejects(store.importOrders(conflictThenFailure()), ImportConflictError)

    assert.deepEqual(await listAll(store), before)
    assert.equal(await store.dataVersion(), version)
  })

  it('applies records with the same id in input order, as a record-by-record upsert does', async () => {
    // pending → shipped inside one import is fine; then shipped → pending is refused.
    assert.equal(await store.importOrders(from([order(500n), order(500n, { status: 'shipped', quantity: 9 })])), 2)
    const [row] = await sql<{ status: string; quantity: number }>('SELECT status, quantity FROM orders WHERE id = 500')
    assert.deepEqual(row, { status: 'shipped', quantity: 9 })
    await assert.rejects(
      store.importOrders(from([order(501n, { status: 'shipped' }), order(501n)])),
      (error: unknown) => error instanceof ImportConflictError && error.message === 'order 501 is shipped and cannot become pending',
    )
    // Re-importing a cancelled order as cancelled keeps its first cancelled_at.
    await store.importOrders(from([order(502n, { status: 'cancelled' })]))
    const [first] = await sql<{ cancelled_at: Date }>('SELECT cancelled_at FROM orders WHERE id = 502')
    await store.importOrders(from([order(502n, { status: 'cancelled', quantity: 3 })]))
    const [second] = await sql<{ cancelled_at: Date; quantity: number }>('SELECT cancelled_at, quantity FROM orders WHERE id = 502')
    assert.deepEqual(second, { cancelled_at: first!.cancelled_at, quantity: 3 })
  })

  it('reports import progress every 10,000 records and bumps data_version once', async () => {
    const version = await store.dataVersion()
    const progress: number[] = []
    const count = await store.importOrders(
      from(Array.from({ length: 25_000 }, (_, i) => order(100_000n + BigInt(i)))),
      (n) => progress.push(n),
    )
    assert.equal(count, 25_000)
    assert.deepEqual(progress, [10_000, 20_000])
    assert.equal(await store.dataVersion(), version + 1n)
    assert.equal(await store.importOrders(from([])), 0)
    assert.equal(await store.dataVersion(), version + 1n)
  })

  it('streams one consistent snapshot in ascending id order, in batches', async () => {
    const sizes: number[] = []
    let last = -1n
    let sawCancelledOrder = false
    let cancelledMidway = false
    for await (const batch of store.streamOrders(1000)) {
      sizes.push(batch.length)
      for (const o of batch) {
        assert.ok(o.id! > last)
        last = o.id!
        if (o.id === 124_999n) sawCancelledOrder = true
      }
      if (!cancelledMidway) {
        // Committed while the stream is open: the stream still shows the order.
        assert.equal(await store.cancelOrder(124_999n, null), 'cancelled')
        cancelledMidway = true
      }
    }
    assert.ok(sawCancelledOrder)
    assert.ok(sizes.length > 1 && sizes.slice(0, -1).every((n) => n === 1000))
    assert.ok(!(await listAll(store)).some((o) => o.id === 124_999n))
  })

  it('streamOrdersJson writes exactly what the schema serializer writes for streamOrders', async () => {
    await store.importOrders(
      from([
        order(INT64_MIN, { petId: INT64_MIN, quantity: 2_147_483_647 }),
        order(-1n, { petId: null, quantity: null, shipDate: null, complete: true, status: 'shipped' }),
        order(0n, { shipDate: '0001-01-01T00:00:00.000Z' }),
        order(700n, { shipDate: '9999-12-31T23:59:59.999Z' }),
        order(701n),
      ]),
    )
    // Microseconds (the import never writes them) are dropped, as streamOrders drops them.
    await sql(`UPDATE orders SET ship_date = '2027-01-02 03:04:05.678999+00' WHERE id = 701`)
    const objects = await listAll(store, 777)
    assert.equal(objects.find((o) => o.id === 701n)?.shipDate, '2027-01-02T03:04:05.678Z')
    for (const id of [INT64_MIN, INT64_MAX, TWO_53 + 1n, -1n]) assert.ok(objects.some((o) => o.id === id))
    const pages = await jsonPages(store)
    assert.ok(pages.length > 10, `${pages.length} pages`) // the test data is several MB: many socket reads
    assert.ok(pages.every((page) => page.length > 0 && page.startsWith('{"id":') && page.endsWith('}')))
    assert.equal(`[${pages.join(',')}]`, serializeOrders(objects))
  })

  it('streamOrdersJson: an empty list, and a list of one order', async () => {
    const fresh = await createTestDatabase()
    const small = new PostgresStore(fresh.url, { poolSize: 2 })
    try {
      await small.migrate()
      assert.deepEqual(await jsonPages(small), [])
      await small.importOrders(from([order(-5n, { status: 'cancelled' }), order(7n, { petId: null })]))
      assert.deepEqual(await jsonPages(small), [serializeOrders(await listAll(small)).slice(1, -1)])
      assert.equal(small.poolStats().idle, small.poolStats().total, 'a finished list returns its client')
    } finally {
      await small.close()
      await fresh.drop()
    }
  })

  it('streamOrdersJson reads one snapshot; breaking out mid-COPY closes its connection', async () => {
    let body = ''
    for await (const page of store.streamOrdersJson()) {
      // Committed while the stream is open: the stream still shows the order.
      if (body === '') assert.equal(await store.cancelOrder(124_998n, null), 'cancelled')
      body += page
    }
    assert.ok(body.includes('{"id":124998,'))
    assert.ok(!(await jsonPages(store)).join(',').includes('{"id":124998,'))

    for await (const page of store.streamOrdersJson()) {
      assert.ok(page.toString().startsWith('{"id":'))
      break // the COPY is still sending
    }
    // The connection, mid-COPY, is closed rather than returned; its backend ends the statement.
    const stats = store.poolStats()
    assert.equal(stats.idle, stats.total)
    await within(3000, 'the COPY ended', async () => (await storeSessions()).every((s) => s.state === 'idle'))
  })

  it('breaking out of streamOrders closes the cursor and releases the client', async () => {
    let batches = 0
    for await (const batch of store.streamOrders(1000)) {
      assert.equal(batch.length, 1000)
      batches++
      break
    }
    assert.equal(batches, 1)
    const stats = store.poolStats()
    assert.equal(stats.idle, stats.total)
    const sessions = await storeSessions()
    assert.deepEqual(
      sessions.filter((s) => s.state !== 'idle'),
      [],
    )
  })

  it('manages API keys: create, find by hash, list, revoke by id or prefix', async () => {
    const expiresAt = new Date('2030-01-01T00:00:00.000Z')
    const a = await store.createApiKey({ name: 'a', hash: 'h'.repeat(64), displayPrefix: 'pso_AAAAAAAA', scopes: ['orders:read'], expiresAt })
    const b = await store.createApiKey({ name: 'b', hash: 'i'.repeat(64), displayPrefix: 'pso_BBBBBBBB', scopes: ['orders:read', 'orders:cancel', 'pets:read'], expiresAt: null })
    const c = await store.createApiKey({ name: 'c', hash: 'j'.repeat(64), displayPrefix: 'pso_BBBBBBBB', scopes: ['pets:read'], expiresAt: null })
    assert.equal(typeof a.id, 'bigint')
    assert.ok(a.createdAt instanceof Date)
    assert.deepEqual(a.expiresAt, expiresAt)
    assert.equal(a.revokedAt, null)
    assert.deepEqual(a.scopes, ['orders:read'])

    assert.deepEqual(await store.findApiKeyByHash('i'.repeat(64)), b)
    assert.equal(await store.findApiKeyByHash('x'.repeat(64)), undefined)
    assert.deepEqual(await store.listApiKeys(), [a, b, c])

    const revoked = await store.revokeApiKey('pso_AAAAAAAA')
    assert.ok(revoked?.revokedAt instanceof Date)
    await new Promise((resolve) => setTimeout(resolve, 5))
    const again = await store.revokeApiKey(a.id.toString())
    assert.deepEqual(again?.revokedAt, revoked.revokedAt) // the first revocation time is kept
    assert.deepEqual((await store.findApiKeyByHash('h'.repeat(64)))?.revokedAt, revoked.revokedAt)

    await assert.rejects(store.revokeApiKey('pso_BBBBBBBB'), /"pso_BBBBBBBB" matches 2 keys; revoke by id/)
    assert.equal((await store.revokeApiKey(c.id.toString()))?.name, 'c')
    assert.equal(await store.revokeApiKey('pso_nothing1'), undefined)
    assert.equal(await store.revokeApiKey('123456789'), undefined)
    assert.equal(await store.revokeApiKey('9999999999999999999'), undefined)
    await assert.rejects(
      store.createApiKey({ name: 'dup', hash: 'h'.repeat(64), displayPrefix: 'pso_CCCCCCCC', scopes: ['pets:read'], expiresAt: null }),
      (error: unknown) => !(error instanceof StoreUnavailableError) && (error as { code?: string }).code === '23505',
    )
  })

  it('answers StoreUnavailableError when nothing listens at the address', async () => {
    const port = await unusedPort()
    const down = new PostgresStore(`postgres://postgres@127.0.0.1:${port}/test`, { poolSize: 2 })
    try {
      await rejectsUnavailable(down.ping(), 'ping')
      await rejectsUnavailable(down.migrate(), 'migrate')
      await rejectsUnavailable(down.dataVersion(), 'dataVersion')
      await rejectsUnavailable(down.cancelOrder(1n, null), 'cancelOrder')
      await rejectsUnavailable(down.findApiKeyByHash('x'), 'findApiKeyByHash')
      await rejectsUnavailable(down.importOrders(from([order(1n)])), 'importOrders')
      await rejectsUnavailable(listAll(down), 'streamOrders')
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
    const silent = new PostgresStore(`postgres://postgres@127.0.0.1:${port}/test`, { poolSize: 1, connectionTimeoutMillis: 300 })
    try {
      const started = Date.now()
      await rejectsUnavailable(silent.ping(), 'ping')
      assert.ok(Date.now() - started < 5000)
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
      await Promise.all([behind.ping(), behind.dataVersion(), behind.findPet(1n)])
      await within(5000, 'listener up', () => behind.versionListenerPid() !== undefined)
      await stop()
      await rejectsUnavailable(behind.ping(), 'ping while down')
      await rejectsUnavailable(behind.cancelOrder(1n, null), 'cancelOrder while down')
      await rejectsUnavailable(listAll(behind), 'streamOrders while down')
      await rejectsUnavailable(jsonPages(behind), 'streamOrdersJson while down')
      // The listener's connection is gone too: the version is read, and that fails.
      await within(1000, 'dataVersion unavailable', () => behind.dataVersion().then(() => false, (error) => error instanceof StoreUnavailableError))
      await rejectsUnavailable(behind.dataVersion(), 'dataVersion while down')
      await listen(port)
      await behind.ping()
      assert.equal(await behind.cancelOrder(999_999n, null), 'not_found')
      assert.ok((await listAll(behind)).length > 1000)
      assert.ok((await jsonPages(behind)).length > 0)
      await behind.dataVersion()
    } finally {
      await behind.close()
      if (proxy.listening) await stop()
    }
  })

  it('answers StoreUnavailableError when its connections are terminated, and recovers by itself', async () => {
    // Enough orders (~18 MB of COPY output) that the list cannot have reached this process's socket
    // buffers whole before its backend is terminated: a list that had arrived in full is complete,
    // and with the ~1,000 orders of the suite that happened once in a full run.
    await store.importOrders(from(Array.from({ length: 200_000 }, (_, i) => order(10_000_000n + BigInt(i)))))
    await store.ping()
    const stream = store.streamOrders(1000)[Symbol.asyncIterator]()
    assert.equal((await stream.next()).value?.length, 1000)
    const pages = store.streamOrdersJson()[Symbol.asyncIterator]()
    assert.ok((await pages.next()).value)
    let killed: number[] = []
    try {
      killed = await terminateStoreSessions()
      assert.ok(killed.length >= 2)
      // The open streams' connections are gone: the stream fails (after the batch already
      // fetched ahead, if it arrived before the connection was cut).
      const drain = async (iterator: AsyncIterator<unknown>) => {
        while (!(await iterator.next()).done);
      }
      await rejectsUnavailable(drain(stream), 'streamOrders after terminate')
      await rejectsUnavailable(drain(pages), 'streamOrdersJson after terminate')
    } finally {
      await stream.return?.(undefined)
      await pages.return?.(undefined)
    }

    // No restart: reads go through at once (a read that meets a dead pooled connection is retried
    // on a new one) ...
    await store.ping()
    const [row] = await sql<{ version: string }>('SELECT version::text FROM data_version')
    assert.equal(await store.dataVersion(), BigInt(row!.version))
    // ... and once the terminated backends are gone, the pool has dropped their connections.
    await gone(killed)
    await store.importOrders(from([order(600n)]))
    assert.equal(await store.cancelOrder(600n, null), 'cancelled')
    assert.ok((await listAll(store)).length > 1000)

    // Idle pooled connections terminated between two calls: reads still succeed right away.
    await Promise.all([store.ping(), store.ping(), store.dataVersion()])
    const stats = store.poolStats()
    assert.ok(stats.idle >= 2)
    killed = await terminateStoreSessions()
    assert.ok(killed.length >= stats.total) // and the version listener's, if it was up
    assert.ok((await store.findApiKeyByHash('h'.repeat(64)))?.revokedAt instanceof Date)
    assert.ok((await listAll(store, 1_000_000)).length > 1000) // one round trip: BEGIN, DECLARE, FETCH
    await gone(killed)
    assert.equal(await store.shipOrder(600n), 'cancelled')
  })
})
