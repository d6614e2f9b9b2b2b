import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import fastJson from 'fast-json-stringify'
import Type from 'typebox'
import { hashApiKey } from '../src/domain/api-keys.js'
import { createKey } from '../src/keys/create-key.js'
import type { CancelOutcome, CancelResult, OrderRecord } from '../src/domain/orders.js'
import { Order } from '../src/schemas/order.js'
import type { Pet } from '../src/schemas/pet.js'
import { openStore } from '../src/store/open-store.js'
import { ImportConflictError, StoreUnavailableError, type Store } from '../src/store/store.js'
import { createDatabase, forEachStore, listedOrder, listedOrders, type TestDatabaseHandle } from './support/harness.js'
import { connectSql, type Sql } from './support/sql.js'

// One suite, every store: what the service relies on from a database, held on SQLite and PostgreSQL alike.

const TWO_53 = 2n ** 53n
const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)

// The route's response schema is an array of Order; fast-json-stringify is what Fastify compiles it with.
const serializeOrders = fastJson(Type.Array(Order) as object, {}) as (orders: unknown[]) => string

function order(id: bigint, fields: Partial<OrderRecord> = {}): OrderRecord {
  return { id, petId: 7n, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z', complete: false, status: 'pending', ...fields }
}

async function* from<T>(items: Iterable<T>): AsyncIterable<T> {
  yield* items
}

/** The outcome of a cancel, and the order it answered with (both stores must give the same). */
async function cancelOutcome(result: Promise<CancelResult>): Promise<CancelOutcome> {
  return (await result).outcome
}

async function jsonPages(store: Store): Promise<string[]> {
  const pages: string[] = []
  for await (const page of store.orders.streamJson()) pages.push(page.toString())
  return pages
}


forEachStore('store contract', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let sql: Sql

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    sql = await connectSql(database)
  })

  after(async () => {
    await store?.close()
    await sql?.close()
    await database?.dispose()
  })

  it('migrates once: the second run applies nothing; data_version starts at a random value below 2^48', async () => {
    assert.ok((await store.migrate()).length > 0)
    assert.deepEqual(await store.migrate(), [])
    const [row] = await sql.query<{ v: string }>('SELECT CAST(version AS TEXT) AS v FROM data_version')
    const version = BigInt(row!.v)
    assert.ok(version >= 0n && version < 2n ** 48n, String(version))
    assert.equal(await store.orders.dataVersion(), version)
  })

  it('hasAny: false while no order is listed, true once one is', async () => {
    assert.equal(await store.orders.hasAny(), false)
    await store.orders.import(from([order(1n, { status: 'cancelled' })]))
    assert.equal(await store.orders.hasAny(), false, 'a cancelled order is not listed')
    await store.orders.import(from([order(2n, { status: 'shipped' })]))
    assert.equal(await store.orders.hasAny(), true)
  })

  it('round-trips int64 ids and petIds at 2^53, 2^53+1 and 2^63-1 exactly', async () => {
    const ids = [TWO_53, TWO_53 + 1n, INT64_MAX]
    const records = ids.map((id, i) =>
      order(id, { petId: ids[2 - i]!, quantity: i + 1, shipDate: i === 1 ? null : '2026-11-25T10:00:00.000Z', complete: i === 2, status: i === 2 ? 'shipped' : 'pending' }),
    )
    assert.equal(await store.orders.import(from(records)), 3)
    const listed = (await listedOrders(store)).filter((o) => o.id! >= TWO_53)
    assert.deepEqual(listed, [
      { id: TWO_53, petId: INT64_MAX, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z', complete: false },
      { id: TWO_53 + 1n, petId: TWO_53 + 1n, quantity: 2, complete: false },
      { id: INT64_MAX, petId: TWO_53, quantity: 3, shipDate: '2026-11-25T10:00:00.000Z', complete: true },
    ])

    await store.pets.import(from<Pet>([{ id: INT64_MAX, name: 'Max', tag: 'dog' }, { id: TWO_53 + 1n, name: 'Odd' }]))
    assert.deepEqual(await store.pets.find(INT64_MAX), { id: INT64_MAX, name: 'Max', tag: 'dog' })
    assert.deepEqual(await store.pets.find(TWO_53 + 1n), { id: TWO_53 + 1n, name: 'Odd' })
    assert.equal(await store.pets.find(TWO_53), undefined)
  })

  it('imports pets: text exactly, whatever characters it holds; upserted by id', async () => {
    const names = ['a "quoted" \\ back\\slash, {brace}', 'NULL', '', 'Ünïcødé 🐕', "it's\nmultiline"]
    assert.equal(await store.pets.import(from<Pet>(names.map((name, i) => ({ id: 1000n + BigInt(i), name, tag: name })))), names.length)
    for (const [i, name] of names.entries()) {
      assert.deepEqual(await store.pets.find(1000n + BigInt(i)), { id: 1000n + BigInt(i), name, tag: name })
    }
    await store.pets.import(from<Pet>([{ id: 1000n, name: 'renamed' }]))
    assert.deepEqual(await store.pets.find(1000n), { id: 1000n, name: 'renamed' })
  })

  it('writes the list JSON exactly as the schema serializer does, edge values included', async () => {
    const records = [
      order(INT64_MIN, { petId: INT64_MIN, quantity: 2_147_483_647 }),
      order(-1n, { petId: null, quantity: null, shipDate: null, complete: true, status: 'shipped' }),
      order(0n, { shipDate: '0001-01-01T00:00:00.000Z' }),
      order(700n, { shipDate: '9999-12-31T23:59:59.999Z' }),
      order(701n, { status: 'cancelled' }),
    ]
    await store.orders.import(from(records))
    const pages = await jsonPages(store)
    assert.ok(pages.every((page) => page.length > 0 && page.startsWith('{"id":') && page.endsWith('}')))
    const listed = await listedOrders(store)
    for (const record of records) {
      const found = listed.find((o) => o.id === record.id)
      assert.deepEqual(found, record.status === 'cancelled' ? undefined : listedOrder(record))
    }
    assert.equal(`[${pages.join(',')}]`, serializeOrders(listed))
  })

  it('cancels pending orders only, bumping data_version exactly when it cancels', async () => {
    await store.orders.import(from([order(100n), order(101n, { status: 'shipped', complete: true }), order(102n, { status: 'cancelled' })]))
    const start = await store.orders.dataVersion()

    const first = await store.orders.cancel(100n, 42n)
    assert.equal(first.outcome, 'cancelled')
    assert.equal(await store.orders.dataVersion(), start + 1n)
    const [row] = await sql.query<{ status: string; at: unknown; key: string }>(
      'SELECT status, cancelled_at AS at, CAST(cancelled_by_key AS TEXT) AS key FROM orders WHERE id = 100',
    )
    assert.equal(row?.status, 'cancelled')
    assert.ok(row?.at !== null)
    assert.equal(row?.key, '42')

    // The order as it now stands, as getOrder reads it; again, unchanged, for a later cancel.
    assert.ok(first.outcome === 'cancelled')
    assert.deepEqual(first.order, await store.orders.find(100n))
    assert.equal(first.order.status, 'cancelled')
    assert.deepEqual(await store.orders.cancel(100n, 43n), { outcome: 'already_cancelled', order: first.order })
    assert.equal(await cancelOutcome(store.orders.cancel(101n, null)), 'already_shipped')
    const imported = await store.orders.cancel(102n, null) // imported as cancelled
    assert.deepEqual(imported, { outcome: 'already_cancelled', order: await store.orders.find(102n) })
    assert.equal(await cancelOutcome(store.orders.cancel(999_999n, null)), 'not_found')
    assert.equal(await cancelOutcome(store.orders.cancel(INT64_MAX - 1n, null)), 'not_found')
    assert.equal(await store.orders.dataVersion(), start + 1n)
    const [again] = await sql.query<{ key: string }>('SELECT CAST(cancelled_by_key AS TEXT) AS key FROM orders WHERE id = 100')
    assert.equal(again?.key, '42', 'the first cancel\'s key is kept')

    const ids = (await listedOrders(store)).map((o) => o.id)
    assert.ok(!ids.includes(100n) && !ids.includes(102n) && ids.includes(101n))
  })

  it('ships pending orders only', async () => {
    await store.orders.import(from([order(200n), order(201n, { status: 'cancelled' })]))
    const start = await store.orders.dataVersion()
    assert.equal((await store.orders.ship(200n)).outcome, 'shipped')
    assert.equal(await store.orders.dataVersion(), start + 1n)
    assert.equal((await store.orders.ship(200n)).outcome, 'already_shipped')
    assert.equal((await store.orders.ship(201n)).outcome, 'cancelled')
    assert.equal((await store.orders.ship(202n)).outcome, 'not_found')
    assert.equal(await store.orders.dataVersion(), start + 1n)
    assert.equal(await cancelOutcome(store.orders.cancel(200n, null)), 'already_shipped')
  })

  it('of 50 concurrent cancels of one pending order, exactly one cancels; all return the same order', async () => {
    await store.orders.import(from([order(300n)]))
    const start = await store.orders.dataVersion()
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.orders.cancel(300n, BigInt(i), i % 2 === 0 ? 'duplicate' : 'other')))
    assert.equal(results.filter((r) => r.outcome === 'cancelled').length, 1)
    assert.equal(results.filter((r) => r.outcome === 'already_cancelled').length, 49)
    const stored = await store.orders.find(300n)
    for (const result of results) assert.deepEqual('order' in result ? result.order : undefined, stored)
    assert.equal(stored?.cancellationReason, 'duplicate', 'the first cancel decided')
    assert.equal(await store.orders.dataVersion(), start + 1n)
  })

  it('group-commits concurrent cancels: one transaction, one version bump, each its own exact outcome', async () => {
    await store.orders.import(
      from([order(310n), order(311n), order(312n), order(313n, { status: 'shipped', complete: true }), order(314n, { status: 'cancelled' })]),
    )
    const start = await store.orders.dataVersion()
    const ids = [310n, 311n, 313n, 314n, 999_998n, 310n, 312n, 313n, 311n, 312n]
    const reasons = ['customer_request', 'out_of_stock', null, null, null, 'other', null, null, 'fraudulent', 'duplicate'] as const
    const results = await Promise.all(ids.map((id, i) => store.orders.cancel(id, BigInt(i), reasons[i])))
    const expected: CancelOutcome[] = [
      'cancelled', 'cancelled', 'already_shipped', 'already_cancelled', 'not_found',
      'already_cancelled', 'cancelled', 'already_shipped', 'already_cancelled', 'already_cancelled',
    ]
    assert.deepEqual(results.map((r) => r.outcome), expected)
    // Every cancel of an order got the order as its first cancel left it, with that one's reason.
    for (const [i, id] of ids.entries()) {
      const result = results[i]!
      if ('order' in result) assert.deepEqual(result.order, await store.orders.find(id), `cancel ${i} of ${id}`)
    }
    assert.deepEqual(
      [310n, 311n, 312n].map((id) => (results[ids.indexOf(id)] as { order: { cancellationReason: unknown } }).order.cancellationReason),
      ['customer_request', 'out_of_stock', null],
    )
    assert.equal(await store.orders.dataVersion(), start + 1n) // one batch: one bump
    // Of several cancels of one order, the first decided: its key is the one recorded.
    assert.deepEqual(
      await sql.query('SELECT CAST(id AS TEXT) AS id, CAST(cancelled_by_key AS TEXT) AS key FROM orders WHERE id IN (310, 311, 312) ORDER BY id'),
      [
        { id: '310', key: '0' },
        { id: '311', key: '1' },
        { id: '312', key: '6' },
      ],
    )
  })

  it('fails a whole batch exactly: every cancel in it is rejected and none of them commits', async () => {
    const ids = Array.from({ length: 20 }, (_, i) => 320n + BigInt(i))
    await store.orders.import(from(ids.map((id) => order(id))))
    const start = await store.orders.dataVersion()
    // One order the database refuses to change makes the batch's transaction fail.
    if (kind === 'sqlite') {
      await sql.query(`CREATE TRIGGER refuse_331 BEFORE UPDATE ON orders WHEN NEW.id = 331 BEGIN SELECT RAISE(ABORT, 'refused 331'); END`)
    } else {
      await sql.query(`CREATE FUNCTION refuse_331() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN IF NEW.id = 331 THEN RAISE EXCEPTION 'refused 331'; END IF; RETURN NEW; END $$`)
      await sql.query('CREATE TRIGGER refuse_331 BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION refuse_331()')
    }
    let results: PromiseSettledResult<CancelResult>[]
    try {
      results = await Promise.allSettled(ids.map((id) => store.orders.cancel(id, null)))
    } finally {
      await sql.query(kind === 'sqlite' ? 'DROP TRIGGER refuse_331' : 'DROP TRIGGER refuse_331 ON orders')
      if (kind === 'postgres') await sql.query('DROP FUNCTION refuse_331()')
    }
    for (const result of results) {
      assert.equal(result.status, 'rejected')
      assert.match(String((result as PromiseRejectedResult).reason), /refused 331/)
    }
    const [row] = await sql.query<{ n: unknown }>(`SELECT count(*) AS n FROM orders WHERE id BETWEEN 320 AND 339 AND status = 'pending'`)
    assert.equal(Number(row?.n), 20, 'no cancel of the failed batch committed')
    assert.equal(await store.orders.dataVersion(), start)
    // And each can be cancelled now, exactly once.
    assert.deepEqual(await Promise.all(ids.map((id) => cancelOutcome(store.orders.cancel(id, null)))), ids.map(() => 'cancelled'))
    assert.equal(await store.orders.dataVersion(), start + 1n)
  })

  it('imports all or nothing: an input failing midway rolls back and its error is rethrown as is', async () => {
    const before = await listedOrders(store)
    const version = await store.orders.dataVersion()
    const boom = new Error('read error at line 12001')
    async function* failing(): AsyncIterable<OrderRecord> {
      for (let i = 0; i < 12_000; i++) yield order(10_000n + BigInt(i))
      throw boom
    }
    await assert.rejects(store.orders.import(failing()), (error) => error === boom)
    assert.deepEqual(await listedOrders(store), before)
    assert.equal(await store.orders.dataVersion(), version)
  })

  it('refuses to revive a cancelled order or to move a shipped one back, naming the first such record', async () => {
    await store.orders.import(from([order(400n, { status: 'cancelled' }), order(401n, { status: 'shipped' })]))
    const before = await listedOrders(store)
    const version = await store.orders.dataVersion()

    await assert.rejects(
      store.orders.import(from([order(402n), order(400n)])),
      (error: unknown) => error instanceof ImportConflictError && error.message === 'order 400 is cancelled and cannot become pending',
    )
    // The first offending record in input order is reported.
    const many = Array.from({ length: 3000 }, (_, i) => order(20_000n + BigInt(i)))
    many.splice(1000, 0, order(401n, { status: 'cancelled' }))
    many.splice(2000, 0, order(400n, { status: 'shipped' }))
    await assert.rejects(
      store.orders.import(from(many)),
      (error: unknown) => error instanceof ImportConflictError && error.message === 'order 401 is shipped and cannot become cancelled',
    )
    // A conflict is reported before a later failure of the input, as a record-by-record import would.
    async function* conflictThenFailure(): AsyncIterable<OrderRecord> {
      yield order(400n, { status: 'shipped' })
      throw new Error('input broke')
    }
    await assert.rejects(store.orders.import(conflictThenFailure()), ImportConflictError)

    assert.deepEqual(await listedOrders(store), before)
    assert.equal(await store.orders.dataVersion(), version)
  })

  it('applies records with the same id in input order, as a record-by-record upsert does', async () => {
    // pending → shipped inside one import is fine; then shipped → pending is refused.
    assert.equal(await store.orders.import(from([order(500n), order(500n, { status: 'shipped', quantity: 9 })])), 2)
    const [row] = await sql.query<{ status: string; quantity: unknown }>('SELECT status, quantity FROM orders WHERE id = 500')
    assert.deepEqual({ ...row, quantity: Number(row?.quantity) }, { status: 'shipped', quantity: 9 })
    await assert.rejects(
      store.orders.import(from([order(501n, { status: 'shipped' }), order(501n)])),
      (error: unknown) => error instanceof ImportConflictError && error.message === 'order 501 is shipped and cannot become pending',
    )
    // Re-importing a cancelled order as cancelled keeps its first cancelled_at.
    await store.orders.import(from([order(502n, { status: 'cancelled' })]))
    const [first] = await sql.query<{ at: unknown }>('SELECT cancelled_at AS at FROM orders WHERE id = 502')
    await new Promise((resolve) => setTimeout(resolve, 5))
    await store.orders.import(from([order(502n, { status: 'cancelled', quantity: 3 })]))
    const [second] = await sql.query<{ at: unknown; quantity: unknown }>('SELECT cancelled_at AS at, quantity FROM orders WHERE id = 502')
    assert.deepEqual({ at: second?.at, quantity: Number(second?.quantity) }, { at: first!.at, quantity: 3 })
  })

  it('imports a cancelled order\'s time and reason; never changes those of an order already cancelled', async () => {
    await store.orders.import(
      from([
        order(510n, { status: 'cancelled', cancelledAt: '2026-11-20T08:15:00.123Z', cancellationReason: 'out_of_stock' }),
        order(511n, { status: 'cancelled' }),
        order(512n),
        order(513n),
      ]),
    )
    const given = await store.orders.find(510n)
    assert.deepEqual([given?.cancelledAt, given?.cancellationReason], ['2026-11-20T08:15:00.123Z', 'out_of_stock'])
    const byImport = await store.orders.find(511n)
    assert.match(byImport?.cancelledAt ?? '', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    assert.equal(byImport?.cancellationReason, null)
    const cancelled = await store.orders.cancel(512n, null, 'customer_request')
    assert.ok(cancelled.outcome === 'cancelled')

    // Imported again, cancelled with another time and reason: the first cancellation stays, the rest is updated.
    const other = { cancelledAt: '2030-01-01T00:00:00.000Z', cancellationReason: 'fraudulent' } as const
    await store.orders.import(
      from([
        order(510n, { status: 'cancelled', quantity: 5, ...other }),
        order(511n, { status: 'cancelled', ...other }),
        order(512n, { status: 'cancelled', ...other }),
        order(513n, { status: 'cancelled', ...other }), // pending until now: takes them
      ]),
    )
    // A change moves the version on; the unchanged ones keep theirs.
    assert.deepEqual(await store.orders.find(510n), { ...given, quantity: 5, version: 2 })
    assert.deepEqual(await store.orders.find(511n), byImport)
    assert.deepEqual(await store.orders.find(512n), cancelled.order)
    const now = await store.orders.find(513n)
    assert.deepEqual([now?.status, now?.cancelledAt, now?.cancellationReason], ['cancelled', other.cancelledAt, other.cancellationReason])
    // A cancel of an imported cancellation answers with it.
    assert.deepEqual(await store.orders.cancel(510n, null, 'other'), { outcome: 'already_cancelled', order: { ...given, quantity: 5, version: 2 } })
  })

  it('reports import progress every 10,000 records and bumps data_version once', async () => {
    const version = await store.orders.dataVersion()
    const progress: number[] = []
    const count = await store.orders.import(
      from(Array.from({ length: 25_000 }, (_, i) => order(100_000n + BigInt(i)))),
      (n) => progress.push(n),
    )
    assert.equal(count, 25_000)
    assert.deepEqual(progress, [10_000, 20_000])
    assert.equal(await store.orders.dataVersion(), version + 1n)
    assert.equal(await store.orders.import(from([])), 0)
    assert.equal(await store.orders.dataVersion(), version + 1n)
  })

  it('streams the list from one snapshot: a cancel committed meanwhile is not seen by a list already started', async () => {
    let body = ''
    for await (const page of store.orders.streamJson()) {
      if (body === '') assert.equal(await cancelOutcome(store.orders.cancel(124_998n, null)), 'cancelled')
      body += page
    }
    assert.ok(body.includes('{"id":124998,'))
    assert.ok(!(await jsonPages(store)).join(',').includes('{"id":124998,'))
  })

  it('manages API keys: create, find by hash, list, revoke by id or prefix, reporting the earlier state', async () => {
    const expiresAt = new Date('2030-01-01T00:00:00.000Z')
    const keys = store.apiKeys
    const a = await keys.create({ name: 'a', hash: 'h'.repeat(64), displayPrefix: 'pso_AAAAAAAA', scopes: ['orders:read'], expiresAt })
    const b = await keys.create({ name: 'b', hash: 'i'.repeat(64), displayPrefix: 'pso_BBBBBBBB', scopes: ['orders:read', 'orders:cancel', 'pets:read'], expiresAt: null })
    const c = await keys.create({ name: 'c', hash: 'j'.repeat(64), displayPrefix: 'pso_BBBBBBBB', scopes: ['pets:read'], expiresAt: null })
    assert.equal(typeof a.id, 'bigint')
    assert.ok(a.createdAt instanceof Date)
    assert.deepEqual(a.expiresAt, expiresAt)
    assert.equal(a.revokedAt, null)
    assert.deepEqual(a.scopes, ['orders:read'])

    assert.deepEqual(await keys.findByHash('i'.repeat(64)), b)
    assert.equal(await keys.findByHash('x'.repeat(64)), undefined)
    assert.deepEqual(await keys.list(), [a, b, c])

    const revoked = await keys.revoke('pso_AAAAAAAA')
    assert.equal(revoked?.alreadyRevoked, false)
    assert.ok(revoked.key.revokedAt instanceof Date)
    await new Promise((resolve) => setTimeout(resolve, 5))
    const again = await keys.revoke(a.id.toString())
    assert.equal(again?.alreadyRevoked, true)
    assert.deepEqual(again.key.revokedAt, revoked.key.revokedAt) // the first revocation time is kept
    assert.deepEqual((await keys.findByHash('h'.repeat(64)))?.revokedAt, revoked.key.revokedAt)

    await assert.rejects(keys.revoke('pso_BBBBBBBB'), /"pso_BBBBBBBB" matches 2 keys; revoke by id/)
    assert.equal((await keys.revoke(c.id.toString()))?.key.name, 'c')
    assert.equal(await keys.revoke('pso_nothing1'), undefined)
    assert.equal(await keys.revoke('123456789'), undefined)
    assert.equal(await keys.revoke('9999999999999999999'), undefined)
    await assert.rejects(
      keys.create({ name: 'dup', hash: 'h'.repeat(64), displayPrefix: 'pso_CCCCCCCC', scopes: ['pets:read'], expiresAt: null }),
      (error: unknown) =>
        !(error instanceof StoreUnavailableError) && (error as { code?: string }).code === (kind === 'sqlite' ? 'SQLITE_CONSTRAINT_UNIQUE' : '23505'),
    )
  })

  it('stores only a hash and a display prefix of a key: no column of api_keys holds the key', async () => {
    const { key, secret } = await createKey(store.apiKeys, { name: 'secret keeper' })
    const rows = await sql.query<Record<string, unknown>>(`SELECT * FROM api_keys WHERE id = ${key.id}`)
    assert.equal(rows.length, 1)
    const columns = Object.entries(rows[0]!).map(([name, value]) => [name, String(value)] as const)
    assert.ok(columns.some(([name, value]) => name === 'hash' && value === hashApiKey(secret)))
    const hidden = secret.slice(key.displayPrefix.length) // all but the display prefix
    assert.ok(hidden.length >= 28)
    for (const [name, value] of columns) {
      assert.ok(!value.includes(secret) && !value.includes(hidden), `column ${name} holds the key`)
    }
  })
})
