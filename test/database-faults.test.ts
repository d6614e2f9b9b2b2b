import assert from 'node:assert/strict'
import { mkdirSync, readdirSync, rmSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { dirname } from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import pg from 'pg'
import { SERVER_SQLITE_OPTIONS } from '../src/server.js'
import { PostgresDatabase } from '../src/store/postgres/database.js'
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js'
import { isUnavailable } from '../src/store/postgres/errors.js'
import { bearer, createDatabase, eventually, expectError, order, records, startTestServer, type TestServer } from './support/harness.js'
import { postgresSkipReason } from './support/postgres.js'
import { assertOneLineError, cli } from './support/cli.js'
import { spawnServer } from './support/server-process.js'
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

    postgres.start() // returns once the server accepts connections
    // Recovered by itself: /readyz reads through the pool, which replaces the connections lost with
    // the server. Asked until it answers 200, with no deadline: how soon is the machine's, not the code's.
    await eventually(async () => (await fetch(`${server.origin}/readyz`)).status === 200, 100)
    assert.equal((await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })).status, 204)
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
  })

  it('answers 503 while PostgreSQL stays silent on open connections, and serves again once it answers, with no restart', { skip: reason }, async () => {
    const { relay, url } = await silentDatabase()
    const server = await startTestServer('postgres', {
      env: { DATABASE_QUERY_TIMEOUT_MS: '1000' },
      database: { kind: 'postgres', config: { kind: 'postgres', url, poolSize: 4 }, url, dispose: async () => {} },
    })
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: 2n }])
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)

    relay.silence() // connections stay open; nothing reaches either side
    const cancel = await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })
    assert.equal(cancel.headers.get('retry-after'), '1')
    await expectError(cancel, 503, 'service_unavailable')
    await expectError(await fetch(`${server.origin}/v2/store/orders/2`, { headers: bearer(key) }), 503, 'service_unavailable')
    await expectError(await fetch(`${server.origin}/readyz`), 503, 'service_unavailable')

    relay.resume()
    // The silent connections were closed; new ones answer. Asked until ready, with no deadline.
    await eventually(async () => (await fetch(`${server.origin}/readyz`)).status === 200, 100)
    assert.equal((await fetch(`${server.origin}/v1/store/orders/2`, { method: 'DELETE', headers: bearer(key) })).status, 204)
    const list = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    assert.equal(list.status, 200)
    assert.deepEqual(((await list.json()) as { id: number }[]).map((order) => order.id), [1], 'the cancel that got 503 changed nothing')
  })

  it('stops on SIGTERM while PostgreSQL is silent, though the peer never closes its connections', { skip: reason }, async () => {
    const { relay, url } = await silentDatabase()
    const server = await spawnServer(url, { DATABASE_QUERY_TIMEOUT_MS: '1000', SHUTDOWN_TIMEOUT_MS: '1000' })
    assert.equal((await fetch(`${server.origin}/readyz`)).status, 200) // the pool and the listener hold connections
    relay.silence()
    server.child.kill('SIGTERM')
    // Until it exits, however long that takes here: before, it never did.
    assert.deepEqual(await server.exited, { code: 0, signal: null }, server.output())
  })

  it('fails a COPY whose server falls silent between two pages as unavailable, once its query timeout has passed', { skip: reason }, async () => {
    const { relay, url } = await silentDatabase()
    const postgres = new PostgresDatabase(url, { poolSize: 2, queryTimeoutMillis: 500 })
    after(() => postgres.close())
    // More rows than the socket and the stream buffer between them: the reader must wait for the server.
    const { connection, pages, first } = await postgres.copyOut(`COPY (SELECT repeat('x', 1000) FROM generate_series(1, 200000)) TO STDOUT`)
    assert.equal(first.done, false)
    relay.silence()
    await assert.rejects(
      (async () => {
        for (let page = await pages.next(); page.done !== true; page = await pages.next());
      })(),
      (error: unknown) => error instanceof Error && /Query read timeout/.test(error.message) && isUnavailable(error),
    )
    connection.discard()
    relay.resume()
    // The pool answers again on a new connection.
    assert.deepEqual((await postgres.read<{ one: number }>('SELECT 1 AS one')).rows, [{ one: 1 }])
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

/**
 * A new PostgreSQL database reached through a silentRelay: its DATABASE_URL through the relay. Both
 * are removed after the test (the relay first, so that nothing waits on a silent connection).
 */
async function silentDatabase(): Promise<{ relay: Awaited<ReturnType<typeof silentRelay>>; url: string }> {
  const database = await createDatabase('postgres')
  const relay = await silentRelay(new URL(database.url))
  after(async () => {
    relay.close()
    await database.dispose()
  })
  const through = new URL(database.url)
  through.host = `127.0.0.1:${relay.port}`
  return { relay, url: through.href }
}

/**
 * A TCP relay to PostgreSQL that can fall silent: `silence()` keeps every connection open and drops
 * what either side sends, its end included (a stalled proxy, a black-holed route); `resume()`
 * forwards again, on new connections and old.
 */
async function silentRelay(upstream: URL): Promise<{ port: number; silence(): void; resume(): void; close(): void }> {
  let silent = false
  const sockets = new Set<Socket>()
  // Half-open allowed: while silent, an end from either side is swallowed too, as by a stalled proxy.
  const relay = createServer({ allowHalfOpen: true }, (client) => {
    const server = connect({ port: Number(upstream.port || 5432), host: upstream.hostname, allowHalfOpen: true })
    for (const [from, to] of [
      [client, server],
      [server, client],
    ] as const) {
      sockets.add(from)
      from.on('data', (chunk: Buffer) => void (silent || to.write(chunk)))
      from.on('end', () => void (silent || to.end()))
      from.on('error', () => {})
      from.on('close', () => {
        sockets.delete(from)
        if (!silent) to.destroy()
      })
    }
  })
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
  return {
    port: (relay.address() as AddressInfo).port,
    silence: () => void (silent = true),
    resume: () => void (silent = false),
    close: () => {
      relay.close()
      for (const socket of sockets) socket.destroy()
    },
  }
}

/** Resolves once the server has read the cancel's request (its DELETE), before it has answered it. */
function cancelReceived(server: TestServer): Promise<void> {
  return new Promise((resolve) => {
    const seen = (request: IncomingMessage): void => {
      if (request.method !== 'DELETE') return
      server.app.server.off('request', seen)
      resolve()
    }
    server.app.server.on('request', seen)
  })
}

describe('SQLite folder removed under a running server [sqlite]', () => {
  it('answers 503 (writes too, the writer open before), /readyz 503, and never makes a new database file when the folder comes back', async () => {
    const database = await createDatabase('sqlite')
    const server: TestServer = await startTestServer('sqlite', { database })
    after(() => database.dispose())
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: 2n }, { id: 3n }])
    assert.equal((await fetch(`${server.origin}/readyz`)).status, 200)
    // A write first: the writer's connection is open when the file goes.
    assert.equal((await fetch(`${server.origin}/v1/store/orders/3`, { method: 'DELETE', headers: bearer(key) })).status, 204)
    const path = (database.config as { path: string }).path
    const folder = dirname(path)
    rmSync(folder, { recursive: true, force: true })

    await expectError(await fetch(`${server.origin}/readyz`), 503, 'service_unavailable')
    // Not acknowledged into the removed file, where it would be lost.
    await expectError(await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) }), 503, 'service_unavailable')
    mkdirSync(folder, { mode: 0o700 })
    const place = await fetch(`${server.origin}/v2/store/orders`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json' }, body: '{"petId":1,"quantity":1}' })
    await expectError(place, 503, 'service_unavailable')
    await expectError(await fetch(`${server.origin}/readyz`), 503, 'service_unavailable')
    assert.deepEqual(readdirSync(folder), [], 'no database was made anew')
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
      const pending = fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })
      // Reads are answered while the lock is held, which it is until the cancel's 503 has come. That
      // the event loop is free while the cancel waits (requests answered before its end) is the next
      // test's, whose retry window (30 s) is far longer than the requests it waits through.
      assert.equal((await fetch(`${server.origin}/healthz`)).status, 200)
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
    // The cancel is retried for RETRY_MS while the lock is held: far longer than the few requests
    // below take, and the test ends the wait itself by releasing the lock. The store lets its other
    // statements wait twice as long: a commit attempt that waited inside SQLite would hold the event
    // loop past the whole retry window, and the cancel would fail (503) before any request below.
    const RETRY_MS = 30_000
    const BUSY_TIMEOUT_MS = 2 * RETRY_MS
    const server = await startTestServer('sqlite', { database, sqlite: { busyTimeoutMs: BUSY_TIMEOUT_MS, busyRetryMs: RETRY_MS } })
    after(() => database.dispose())
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }])
    const other = new Database((database.config as { path: string }).path)
    other.exec('BEGIN IMMEDIATE')
    let pending: Promise<Response>
    try {
      const received = cancelReceived(server)
      let settled = false
      pending = fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) }).finally(() => (settled = true))
      await received
      // The server runs in this process. Its event loop is not held while the cancel waits: requests
      // sent once the server has the cancel are answered one after another, the cancel still waiting.
      for (let i = 1; i <= 3; i++) {
        assert.equal((await fetch(`${server.origin}/healthz`)).status, 200)
        assert.equal(settled, false, `request ${i} was answered only after the cancel`)
      }
    } finally {
      other.exec('ROLLBACK')
      other.close()
    }
    // The lock released within the retry window, the cancel that waited for it commits.
    assert.equal((await pending).status, 204)
  })

  it('commits a cancel that was waiting when the lock is released within the retry window', async () => {
    const database = await createDatabase('sqlite')
    // A retry window far longer than the test takes: the release, not a timer, ends the wait.
    const server = await startTestServer('sqlite', { database, sqlite: { ...SERVER_SQLITE_OPTIONS, busyRetryMs: 30_000 } })
    after(() => database.dispose())
    const key = await server.createKey()
    await server.importOrders([{ id: 1n }])
    const other = new Database((database.config as { path: string }).path)
    other.exec('BEGIN IMMEDIATE')
    const received = cancelReceived(server)
    let settled = false
    const pending = fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) }).finally(() => (settled = true))
    await received
    // The server has read the cancel and answered another request since: the cancel waits for the lock.
    assert.equal((await fetch(`${server.origin}/healthz`)).status, 200)
    assert.equal(settled, false, 'the cancel waits for the lock')
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

describe('SQLite locked by another process, seen from the CLI [sqlite]', () => {
  it('a write that cannot get the lock fails in one line saying another connection holds it, and changes nothing', async () => {
    const database = await createDatabase('sqlite')
    after(() => database.dispose())
    const server = await startTestServer('sqlite', { database })
    await server.importOrders([{ id: 1n }])
    await server.close()
    const other = new Database((database.config as { path: string }).path)
    other.exec('BEGIN IMMEDIATE') // as a long import holds it
    let result: Awaited<ReturnType<typeof cli>>
    try {
      result = await cli(['orders', 'ship', '1'], { DATABASE_URL: database.url })
    } finally {
      other.exec('ROLLBACK')
      other.close()
    }
    assertOneLineError(result, 1, /SQLite is unavailable: another connection holds its write lock \(an import, a backup, another process\) \(SQLITE_BUSY\)/)
    const check = new Database((database.config as { path: string }).path, { readonly: true })
    assert.deepEqual(check.prepare('SELECT status FROM orders WHERE id = 1').get(), { status: 'pending' })
    check.close()
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
