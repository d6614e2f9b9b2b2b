import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { after, before, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import { loadConfig } from '../src/config.js'
import { generateApiKey, SCOPES } from '../src/domain/api-keys.js'
import { openStore } from '../src/store/open-store.js'
import { bearer, createDatabase, forEachStore, order, records, startTestServer, within, type TestDatabaseHandle } from './support/harness.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'

const ORDERS = 200_000 // ~17 MB of list: far more than the socket buffers of a paused client take
const SLOW_READERS = 8
// Mostly identity: a compressed list is small enough to fit in the buffers between the database and a paused client.
const ENCODINGS = ['identity', 'identity', 'identity', 'identity', 'identity', 'identity', 'gzip', 'br'] as const

/** A raw GET of the list that reads its first bytes, then nothing more: the slowest of readers. */
function pausedReader(origin: string, key: string, encoding: string): Promise<{ socket: Socket; closed: Promise<void> }> {
  const { hostname, port } = new URL(origin)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(`GET /v1/store/orders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nAccept-Encoding: ${encoding}\r\n\r\n`)
    })
    const closed = new Promise<void>((done) => socket.once('close', () => done()))
    socket.on('error', () => {})
    socket.once('data', (chunk: Buffer) => {
      socket.pause()
      if (!chunk.toString('latin1').startsWith('HTTP/1.1 200')) reject(new Error(`not a 200: ${chunk.toString('latin1', 0, 200)}`))
      else resolve({ socket, closed })
    })
    setTimeout(() => reject(new Error('no answer to a list in 30 s')), 30_000).unref()
  })
}

/**
 * Asserts that `request` is answered with `status`. A request held up by the slow readers would wait
 * for one of them to leave, which none does while the test runs (the send timeout is 10 minutes): so
 * it is abandoned after ANSWER_MS, a bound for a loaded machine that tells nothing of speed.
 */
const ANSWER_MS = 30_000
async function answers(what: string, request: (signal: AbortSignal) => Promise<Response>, status: number): Promise<void> {
  let response: Response
  try {
    response = await request(AbortSignal.timeout(ANSWER_MS))
  } catch (error) {
    assert.fail(`${what}: no answer while the slow readers are connected (${(error as Error).message})`)
  }
  if (!response.bodyUsed) await response.arrayBuffer()
  assert.equal(response.status, status, `${what}: ${response.status}`)
}

forEachStore('slow list readers', (kind) => {
  let database: TestDatabaseHandle
  let server: ServerProcess
  let key: string
  const keys: string[] = []

  before(async () => {
    database = await createDatabase(kind)
    const store = await openStore(database.config)
    try {
      await store.migrate()
      await store.orders.import(records(Array.from({ length: ORDERS }, (_, i) => order({ id: BigInt(i + 1), quantity: 1, shipDate: '2026-11-25T10:00:00Z' }))))
      for (let i = 0; i < 4; i++) {
        const created = generateApiKey()
        await store.apiKeys.create({ name: `k${i}`, hash: created.hash, displayPrefix: created.displayPrefix, scopes: [...SCOPES], expiresAt: null })
        keys.push(created.secret)
      }
    } finally {
      await store.close()
    }
    key = keys[0]!
    server = await spawnServer(database.url, { DATABASE_POOL_SIZE: '4', RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_AUTH_FAILURES: '0' })
  })

  after(async () => {
    server?.child.kill('SIGKILL')
    await server?.exited
    await database?.dispose()
  })

  it(`${SLOW_READERS} clients reading an uncached list slowly do not hold the database: everything else answers while they stay connected`, async () => {
    const readers = await Promise.all(Array.from({ length: SLOW_READERS }, (_, i) => pausedReader(server.origin, key, ENCODINGS[i % ENCODINGS.length]!)))
    try {
      await sleep(500) // the fills are done by now, or would be holding connections
      for (let round = 0; round < 3; round++) {
        await answers('readiness', (signal) => fetch(`${server.origin}/readyz`, { signal }), 200)
        await answers('a cancel', (signal) => fetch(`${server.origin}/v1/store/orders/${round + 1}`, { method: 'DELETE', headers: bearer(key), signal }), 204)
        // A key this server has not seen yet: looked up in the database.
        await answers('a fresh key', (signal) => fetch(`${server.origin}/v1/pets/1`, { headers: bearer(keys[round + 1]!), signal }), 404)
        // Another read of the database: the new version's list (its first bytes at least).
        await answers('the changed list', async (signal) => {
          const response = await fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': 'br' }, signal })
          await response.body?.cancel()
          return response
        }, 200)
      }
      if (kind === 'sqlite') {
        // Once the last fill is done (the br list just asked for), no reader holds a snapshot: the
        // slow readers hold none. Each of them held one for as long as it was connected before.
        await within(15_000, 'a WAL checkpoint that no slow reader blocks', () => {
          const db = new Database((database.config as { path: string }).path, { timeout: 0 })
          try {
            return (db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[])[0]!.busy === 0
          } finally {
            db.close()
          }
        }, 100)
      }
      assert.ok(readers.every(({ socket }) => !socket.destroyed), 'the slow readers are still connected')
    } finally {
      for (const { socket } of readers) socket.destroy()
    }
  })
})

/**
 * How much of a response the kernel can take from the server while its client reads nothing: the
 * sender's and the receiver's socket buffers at their largest (Linux's tcp_wmem and tcp_rmem
 * maxima; 36 MiB where they cannot be read). A response that fits is sent whole, and never cut off.
 */
function socketBufferBytes(): number {
  const largest = (name: string): number => {
    try {
      return Number(readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/)[2])
    } catch {
      return Number.NaN
    }
  }
  const total = largest('tcp_wmem') + largest('tcp_rmem')
  return Number.isFinite(total) && total > 0 ? total : 36 * 2 ** 20
}

it('a list response not sent within LIST_SEND_TIMEOUT_MS is cut off, and LIST_MAX_RESPONSES bounds those in flight [sqlite]', async () => {
  const SEND_TIMEOUT_MS = 1000
  const server = await startTestServer('sqlite', { env: { LIST_SEND_TIMEOUT_MS: String(SEND_TIMEOUT_MS), LIST_MAX_RESPONSES: '2', RATE_LIMIT_PER_KEY: '0' } })
  const key = await server.createKey()
  // A list larger than the socket buffers can hold (an order is ~100 bytes of it; checked below).
  const buffers = socketBufferBytes()
  const orders = Math.ceil((buffers * 1.25) / 80)
  await server.importOrders(Array.from({ length: orders }, (_, i) => ({ id: BigInt(i + 1), petId: 1n, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z' })))
  const readers = await Promise.all([pausedReader(server.origin, key, 'identity'), pausedReader(server.origin, key, 'identity')])
  try {
    const third = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    assert.equal(third.status, 503)
    assert.equal(third.headers.get('retry-after'), '5')
    await third.arrayBuffer()
    // Past the deadline the two responses are over (the bound admits lists again) ... The list's
    // length is read from the Content-Length of the cached list, not by reading it: a list this large
    // may take longer than SEND_TIMEOUT_MS to read on a busy machine, and be cut off too.
    let whole = 0
    await within(10 * SEND_TIMEOUT_MS, 'a list admitted again, whole in the cache (its length known)', async () => {
      const again = await fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': 'identity' } })
      const length = again.headers.get('content-length')
      await again.body?.cancel()
      if (again.status !== 200 || length === null) return false
      whole = Number(length)
      return true
    }, 100)
    // ... and their connections were closed before the whole list was sent: a paused socket sees it
    // once it reads again. (A response not cut off would send all of it, then close only after the
    // keep-alive timeout; either way this waits for the close, on a busy machine up to 30 s.)
    assert.ok(whole > buffers, `the list (${whole} bytes) is larger than the socket buffers (${buffers} bytes)`)
    for (const { socket } of readers) socket.resume()
    await Promise.race([Promise.all(readers.map((reader) => reader.closed)), sleep(30_000)])
    assert.ok(readers.every(({ socket }) => socket.readyState === 'closed'), 'a paused reader was not closed')
    for (const { socket } of readers) assert.ok(socket.bytesRead < whole, `a paused reader got ${socket.bytesRead} bytes of ${whole}: it was not cut off`)
  } finally {
    for (const { socket } of readers) socket.destroy()
  }
})

it('the list settings are validated at start, LIST_DATABASE_STREAMS below the PostgreSQL pool', () => {
  const postgres = { DATABASE_URL: 'postgres://u@127.0.0.1/db' }
  assert.deepEqual(loadConfig({}).list, { databaseStreams: 2, sendTimeoutMs: 600_000, maxResponses: 64 })
  assert.equal(loadConfig({ ...postgres, DATABASE_POOL_SIZE: '2' }).list.databaseStreams, 1)
  assert.equal(loadConfig({ ...postgres, DATABASE_POOL_SIZE: '1' }).list.databaseStreams, 1)
  assert.equal(loadConfig({ ...postgres, DATABASE_POOL_SIZE: '4', LIST_DATABASE_STREAMS: '3' }).list.databaseStreams, 3)
  assert.throws(() => loadConfig({ ...postgres, DATABASE_POOL_SIZE: '4', LIST_DATABASE_STREAMS: '4' }), /^ConfigError: LIST_DATABASE_STREAMS: must be below DATABASE_POOL_SIZE \(4\)/)
  assert.throws(() => loadConfig({ LIST_SEND_TIMEOUT_MS: '10' }), /^ConfigError: LIST_SEND_TIMEOUT_MS: must be an integer from 1000/)
  assert.throws(() => loadConfig({ LIST_MAX_RESPONSES: '0' }), /^ConfigError: LIST_MAX_RESPONSES/)
  assert.throws(() => loadConfig({ LIST_DATABASE_STREAMS: 'two' }), /^ConfigError: LIST_DATABASE_STREAMS/)
})
