import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import pg from 'pg'
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js'
import { bearer, createDatabase, expectError, order, records, startTestServer, within, type TestServer } from './support/harness.js'
import { postgresSkipReason } from './support/postgres.js'
import { privatePostgresUnavailable, startPrivatePostgres } from './support/private-postgres.js'

describe('PostgreSQL going away [postgres]', async () => {
  const reason = (await postgresSkipReason()) ?? privatePostgresUnavailable()
  if (reason !== undefined && process.env.REQUIRE_POSTGRES === '1') throw new Error(`REQUIRE_POSTGRES=1 but ${reason}`)
  if (reason !== undefined) console.log(`# skipping database fault tests: ${reason}`)

  it('answers 503 (and /readyz 503) while the server is down, and recovers by itself when it is back', { skip: reason }, async () => {
    const postgres = await startPrivatePostgres()
    after(() => postgres.destroy())
    const server = await startTestServer('postgres', {
      database: { kind: 'postgres', config: { kind: 'postgres', url: postgres.url, poolSize: 4 }, url: postgres.url, dispose: async () => {} },
    })
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: 2n }])
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)

    postgres.stop()
    // The list is cached in memory by data version, but the version itself needs the database.
    await expectError(await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) }), 503, 'service_unavailable')
    const cancel = await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })
    assert.equal(cancel.headers.get('retry-after'), '1')
    await expectError(cancel, 503, 'service_unavailable')
    await expectError(await fetch(`${server.origin}/readyz`), 503, 'service_unavailable')
    assert.equal((await fetch(`${server.origin}/healthz`)).status, 200, 'the process itself is still up')

    postgres.start()
    await within(10_000, 'recovered', async () => (await fetch(`${server.origin}/readyz`)).status === 200, 100)
    assert.equal((await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })).status, 204)
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
  })

  it('survives pg_terminate_backend of its connections under load: 503 at worst, then recovery', { skip: reason }, async () => {
    const server = await startTestServer('postgres', { env: { RATE_LIMIT_PER_KEY: '0' } })
    const key = await server.createKey()
    await server.importOrders(Array.from({ length: 500 }, (_, i) => ({ id: BigInt(i + 1) })))
    const statuses: number[] = []
    let stop = false
    let next = 1
    const load = Array.from({ length: 10 }, async (_, i) => {
      while (!stop) {
        const response =
          i % 2 === 0
            ? await fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'if-none-match': '"x"' } })
            : await fetch(`${server.origin}/v1/store/orders/${next++}`, { method: 'DELETE', headers: bearer(key) })
        await response.arrayBuffer()
        statuses.push(response.status)
      }
    })
    const admin = new pg.Client({ connectionString: server.database.url })
    await admin.connect()
    for (let round = 0; round < 5; round++) {
      await sleep(100)
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')
    }
    await admin.end()
    await sleep(300)
    stop = true
    await Promise.all(load)
    assert.deepEqual(statuses.filter((s) => s >= 500 && s !== 503), [], 'only 503 while connections are cut')
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
    assert.equal((await fetch(`${server.origin}/readyz`)).status, 200)
  })
})

describe('SQLite locked by another process [sqlite]', () => {
  it('answers cancels 503 while another connection holds the write lock, keeps reads working, and recovers', async () => {
    const database = await createDatabase('sqlite')
    const server: TestServer = await startTestServer('sqlite', { database })
    after(() => database.dispose())
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: 2n }])

    const other = new Database((database.config as { path: string }).path)
    other.pragma('busy_timeout = 5000')
    other.exec('BEGIN IMMEDIATE') // the write lock, as a long CLI import would hold it
    try {
      const started = Date.now()
      let settled = false
      const pending = fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) }).finally(() => (settled = true))
      // The event loop is not blocked meanwhile: another request is answered before the cancel's
      // 503, which comes only once the cancel has waited about 2 s for the lock (an event loop held
      // by that wait would answer the cancel first).
      assert.equal((await fetch(`${server.origin}/healthz`)).status, 200)
      assert.equal(settled, false, 'answered while the cancel waits for the lock')
      assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200, 'WAL readers are not blocked')
      assert.equal((await fetch(`${server.origin}/readyz`)).status, 200)
      await expectError(await pending, 503, 'service_unavailable')
      assert.ok(Date.now() - started >= 1900, 'the cancel was retried for about 2 s first')
    } finally {
      other.exec('ROLLBACK')
      other.close()
    }
    assert.equal((await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })).status, 204)
  })

  it('never waits for the lock on the event loop, however long the store lets its other statements wait', async () => {
    const database = await createDatabase('sqlite')
    // A busy timeout far longer than the cancel's whole retry window (2 s): a commit attempt that
    // waited inside SQLite would hold the event loop for all of it.
    const BUSY_TIMEOUT_MS = 30_000
    const server = await startTestServer('sqlite', { database, sqlite: { busyTimeoutMs: BUSY_TIMEOUT_MS } })
    after(() => database.dispose())
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }])
    const other = new Database((database.config as { path: string }).path)
    other.exec('BEGIN IMMEDIATE')
    try {
      const started = Date.now()
      const pending = fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })
      // The server runs in this process. Its event loop is not held while the cancel waits: requests
      // are answered one after another meanwhile. Had a commit attempt waited inside SQLite, the
      // loop would have been held for the whole busy timeout, and none answered before the 503.
      let answered = 0
      let settled = false
      void pending.then(() => (settled = true), () => (settled = true))
      while (!settled) {
        await sleep(50)
        assert.equal((await fetch(`${server.origin}/healthz`)).status, 200)
        if (!settled) answered++
      }
      assert.ok(answered >= 2, `${answered} requests answered while a cancel waited for the lock (it waits about 2 s)`)
      await expectError(await pending, 503, 'service_unavailable')
      // For the retry window (2 s, a lower bound), not for the busy timeout, 15 times longer.
      const waited = Date.now() - started
      assert.ok(waited >= 1900 && waited < BUSY_TIMEOUT_MS, `the cancel was retried for about 2 s (${waited} ms), not for the busy timeout`)
    } finally {
      other.exec('ROLLBACK')
      other.close()
    }
  })

  it('commits a cancel that was waiting when the lock is released within the retry window', async () => {
    const database = await createDatabase('sqlite')
    const server = await startTestServer('sqlite', { database })
    after(() => database.dispose())
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }])
    const other = new Database((database.config as { path: string }).path)
    other.exec('BEGIN IMMEDIATE')
    const pending = fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })
    await sleep(500)
    other.exec('COMMIT')
    other.close()
    assert.equal((await pending).status, 204)
  })

  it('fails a whole group-committed batch exactly: every cancel in it gets 503 and none of them commits', async () => {
    const database = await createDatabase('sqlite')
    const server = await startTestServer('sqlite', { database, env: { RATE_LIMIT_PER_KEY: '0' } })
    after(() => database.dispose())
    const key = await server.createKey()
    const ids = Array.from({ length: 20 }, (_, i) => BigInt(i + 1))
    await server.importOrders(ids.map((id) => ({ id })))
    const other = new Database((database.config as { path: string }).path)
    other.exec('BEGIN IMMEDIATE')
    let statuses: number[]
    try {
      statuses = await Promise.all(
        ids.map((id) => fetch(`${server.origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) }).then((r) => r.status)),
      )
    } finally {
      other.exec('ROLLBACK')
      other.close()
    }
    assert.deepEqual(statuses, ids.map(() => 503))
    const list = (await (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).json()) as { id: number }[]
    assert.deepEqual(list.map((o) => BigInt(o.id)), ids, 'no cancel of the failed batch committed')
    // And each can be cancelled now, exactly once.
    const again = await Promise.all(
      ids.map((id) => fetch(`${server.origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) }).then((r) => r.status)),
    )
    assert.deepEqual(again, ids.map(() => 204))
  })
})

describe('SQLite list readers failing [sqlite]', () => {
  it('closes a list reader whose read transaction fails to end, and serves the next list on a fresh one', async () => {
    const database = await createDatabase('sqlite')
    after(() => database.dispose())
    const path = (database.config as { path: string }).path
    const store = new SqliteStore(path)
    after(() => store.close())
    await store.migrate()
    await store.orders.import(records([order({ id: 1n }), order({ id: 2n })]))
    const readList = async (): Promise<string> => {
      const pages: Buffer[] = []
      for await (const page of store.orders.streamJson()) pages.push(page)
      return Buffer.concat(pages).toString()
    }

    // The reader's COMMIT (ending its snapshot) fails once, as an I/O error would make it.
    const exec = Database.prototype.exec
    const failed: Database.Database[] = []
    Database.prototype.exec = function (this: Database.Database, sql: string) {
      if (sql === 'COMMIT' && this.readonly && this.name === path && failed.length === 0) {
        failed.push(this)
        throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' })
      }
      return exec.call(this, sql)
    }
    let first: string
    try {
      first = await readList()
    } finally {
      Database.prototype.exec = exec
    }
    assert.equal(failed.length, 1, 'the fault was injected')
    assert.match(first, /^\{"id":1,.*\},\{"id":2,/, 'the list read before the failure is whole')
    assert.equal(failed[0]!.open, false, 'the reader left in its transaction is closed, not pooled')
    assert.equal(await readList(), first, 'the next list gets a working reader')
  })
})
