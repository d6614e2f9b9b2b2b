import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, it } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { setTimeout as sleep } from 'node:timers/promises'
import { openStore } from '../src/store/open-store.js'
import { IN_MEMORY_MAX_BYTES } from '../src/http/list-cache.js'
import { bearer, createDatabase, forEachStore, records, order, startTestServer, within, type TestServer } from './support/harness.js'
import { BIN, freePort } from './support/server-process.js'

forEachStore('listOrders caching and compression', (kind) => {
  let server: TestServer
  let key: string
  const list = (headers: Record<string, string> = {}) =>
    fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': 'identity', ...headers } })

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    await server.importOrders(Array.from({ length: 3000 }, (_, i) => ({ id: BigInt(i + 1), quantity: (i % 9) + 1 })))
  })

  it('sends a strong ETag and answers If-None-Match with 304 and no body', async () => {
    const first = await list()
    const etag = first.headers.get('etag')
    assert.match(etag ?? '', /^"[0-9]+"$/)
    assert.equal(first.headers.get('cache-control'), 'private, no-cache')
    assert.equal(first.headers.get('vary'), 'Accept-Encoding')
    await first.arrayBuffer()
    const again = await list({ 'if-none-match': etag! })
    assert.equal(again.status, 304)
    assert.equal(await again.text(), '')
    assert.equal(again.headers.get('etag'), etag)
    assert.equal((await list({ 'if-none-match': `"nope", W/${etag}` })).status, 304)
    assert.equal((await list({ 'if-none-match': '*' })).status, 304)
    assert.equal((await list({ 'if-none-match': '"0"' })).status, 200)
    // HEAD alike, with no Content-Length: RFC 9110 §8.6 allows only the 200's (Fastify's HEAD route would write 0).
    const head = await fetch(`${server.origin}/v1/store/orders`, { method: 'HEAD', headers: { ...bearer(key), 'accept-encoding': 'identity', 'if-none-match': etag! } })
    assert.deepEqual([head.status, head.headers.get('etag'), head.headers.get('content-length'), head.headers.get('content-type')], [304, etag, null, null])
  })

  it('answers 200 with a new ETag and the new list after a cancel', async () => {
    const before = await list()
    const etag = before.headers.get('etag')!
    const body = await before.text()
    assert.equal((await fetch(`${server.origin}/v1/store/orders/5`, { method: 'DELETE', headers: bearer(key) })).status, 204)
    const after = await list({ 'if-none-match': etag })
    assert.equal(after.status, 200)
    assert.notEqual(after.headers.get('etag'), etag)
    const text = await after.text()
    assert.notEqual(text, body)
    assert.ok(!text.includes('"id":5,'))
    assert.ok(body.includes('"id":5,'))
  })

  it('sees a change made by another connection (another process) in the very next list', async (t) => {
    // PostgreSQL's bound (LISTEN/NOTIFY, 1 s) is tested with two processes in multi-instance.test.ts.
    if (kind !== 'sqlite') return t.skip('SQLite only')
    const other = await openStore(server.database.config)
    try {
      // A cancel on another connection (as another process's) commits within a few ms: the list right
      // after it is not a stale one.
      for (const id of [31n, 32n, 33n]) {
        const etag = (await list()).headers.get('etag')!
        assert.equal((await other.orders.cancel(id, null)).outcome, 'cancelled')
        const after = await list({ 'if-none-match': etag })
        assert.equal(after.status, 200, `order ${id}`)
        assert.ok(!(await after.text()).includes(`"id":${id},`))
      }
      await other.orders.import(records([order({ id: 90_001n, quantity: 1 })]))
      const after = await list()
      assert.ok((await after.text()).includes('"id":90001,'))
    } finally {
      await other.close()
    }
  })

  it('sees its own change at once: a list right after a cancel is never the cached one', async () => {
    for (const id of [11, 12, 13]) {
      const etag = (await list()).headers.get('etag')!
      assert.equal((await fetch(`${server.origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) })).status, 204)
      const after = await list({ 'if-none-match': etag })
      assert.equal(after.status, 200, `order ${id}`)
      assert.ok(!(await after.text()).includes(`"id":${id},`))
    }
    // The same at the store, with no time in between for a cached version to expire.
    const version = await server.store.orders.dataVersion()
    assert.equal((await server.store.orders.cancel(14n, null)).outcome, 'cancelled')
    assert.notEqual(await server.store.orders.dataVersion(), version)
  })

  it('serves the same bytes from the cache as from the database', async () => {
    const streamed = await (await list()).text()
    const cached = await list()
    assert.ok(cached.headers.get('content-length') !== null, 'a cached list has a Content-Length')
    assert.equal(await cached.text(), streamed)
  })

  it('negotiates gzip and br; compressed bodies decode to the identical JSON', async () => {
    const plain = Buffer.from(await (await list()).arrayBuffer())
    for (const [accept, encoding, decode] of [
      ['gzip', 'gzip', gunzipSync],
      ['br', 'br', brotliDecompressSync],
      ['br;q=1, gzip;q=0.5', 'br', brotliDecompressSync],
      ['gzip, deflate, br', 'br', brotliDecompressSync],
      ['gzip;q=1, br;q=0.8', 'gzip', gunzipSync],
    ] as const) {
      for (let round = 0; round < 2; round++) {
        // Read the raw bytes (fetch would decode them itself).
        const response = await rawGet(server.origin, key, accept)
        assert.equal(response.headers['content-encoding'], encoding, accept)
        assert.match(response.headers.etag ?? '', new RegExp(`^"[0-9]+-${encoding}"$`))
        assert.deepEqual(decode(response.body), plain, `${accept} round ${round}`)
      }
    }
    const identity = await rawGet(server.origin, key, 'identity, gzip;q=0')
    assert.equal(identity.headers['content-encoding'], undefined)
    assert.deepEqual(identity.body, plain)
  })
})

async function rawGet(origin: string, key: string, acceptEncoding: string) {
  const { request } = await import('node:http')
  return new Promise<{ headers: Record<string, string | undefined>; body: Buffer }>((resolve, reject) => {
    const req = request(`${origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': acceptEncoding } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => resolve({ headers: res.headers as Record<string, string | undefined>, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

forEachStore('listOrders caching of a large list (in a file)', (kind) => {
  let server: TestServer
  let key: string
  let directory: string
  let restoreTmpdir: () => void
  const list = () => fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': 'identity' } })
  const cancel = async (id: number) =>
    assert.equal((await fetch(`${server.origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) })).status, 204)
  /** Cache files this process holds open: unlinked, so only /proc/self/fd still shows them. */
  const cacheFiles = (): string[] => openUnlinkedFiles(directory)
  // (A SQLite test database is in TMPDIR too.)
  const onDisk = (): string[] => (readdirSync(directory, { recursive: true }) as string[]).filter((name) => name.includes('petstore-orders-list-'))

  before(async () => {
    // The cache's files go to os.tmpdir(), which follows TMPDIR: a directory of this test's own.
    directory = mkdtempSync(join(tmpdir(), 'list-cache-test-'))
    restoreTmpdir = useTmpdir(directory)
    server = await startTestServer(kind)
    key = await server.createKey()
    await server.importOrders(Array.from({ length: 40_000 }, (_, i) => ({ id: BigInt(i + 1), quantity: (i % 9) + 1 })))
  })

  after(() => {
    restoreTmpdir()
    rmSync(directory, { recursive: true, force: true })
  })

  it('keeps a list over 1 MiB in a file that is unlinked once open, and sends the same bytes from it', async () => {
    const streamed = Buffer.from(await (await list()).arrayBuffer())
    assert.ok(streamed.length > IN_MEMORY_MAX_BYTES, `${streamed.length} bytes`)
    await within(15_000, 'the cache file', () => cacheFiles().length === 1, 20)
    // The file is in the cache once completely written: until then a GET streams from the database.
    let served = await list()
    for (const deadline = Date.now() + 15_000; served.headers.get('content-length') === null && Date.now() < deadline; served = await list()) {
      await served.arrayBuffer()
      await sleep(20)
    }
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), streamed)
    assert.deepEqual(onDisk(), [], 'nothing of the cache has a name in TMPDIR')
    // Readable by the service's user only, for the moment it had a name.
    assert.equal(statSync(cacheFiles()[0]!).mode & 0o777, 0o600)
    for (let round = 0; round < 3; round++) {
      const cached = await list()
      assert.equal(cached.headers.get('content-length'), String(streamed.length))
      assert.deepEqual(Buffer.from(await cached.arrayBuffer()), streamed)
    }
    const head = await fetch(`${server.origin}/v1/store/orders`, { method: 'HEAD', headers: { ...bearer(key), 'accept-encoding': 'identity' } })
    assert.equal(head.status, 200)
    assert.equal(head.headers.get('content-length'), String(streamed.length))
    assert.equal((await head.arrayBuffer()).byteLength, 0)
    assert.deepEqual(Buffer.from(await (await list()).arrayBuffer()), streamed) // the connection is still good
  })

  it('replaces the file when the list changes, and closes the old one', async () => {
    const [before] = cacheFiles().map((file) => statSync(file).ino)
    await cancel(7)
    const text = await (await list()).text()
    assert.ok(!text.includes('"id":7,'))
    await within(15_000, 'the new cache file alone', () => {
      const files = cacheFiles()
      return files.length === 1 && statSync(files[0]!).ino !== before
    }, 20)
    assert.equal(await (await list()).text(), text)
    assert.deepEqual(onDisk(), [])
  })

  it('caches a list whose client went away (the list is read whatever the client does), and keeps serving', async () => {
    await cancel(8) // a new version: the next GET fills from the database
    await readSomeThenLeave(server.origin, key)
    await within(15_000, 'the cache file', () => cacheFiles().length === 1, 20)
    const served = await list()
    assert.ok(served.headers.get('content-length') !== null, 'served from the cache')
    assert.ok(!(await served.text()).includes('"id":8,'))
    // Now from the file, again and again: a client leaving mid-file must not disturb the server.
    for (let i = 0; i < 10; i++) await readSomeThenLeave(server.origin, key)
    assert.ok(!(await (await list()).text()).includes('"id":8,'))
  })

  it('leaves no file behind when the server is killed (SIGKILL) with a large list cached', async () => {
    const port = await freePort()
    const child = spawn(process.execPath, [BIN, 'serve'], {
      env: { ...process.env, DATABASE_URL: server.database.url, PORT: String(port), TMPDIR: directory, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise((resolve) => child.on('close', resolve))
    try {
      const other = `http://127.0.0.1:${port}/v1/store/orders`
      await within(15_000, `the server to start (${stderr})`, () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false), 50)
      const get = () => fetch(other, { headers: { ...bearer(key), 'accept-encoding': 'identity' } })
      let served = await get()
      for (const deadline = Date.now() + 10_000; served.headers.get('content-length') === null && Date.now() < deadline; served = await get()) {
        await served.arrayBuffer()
        await sleep(50)
      }
      assert.ok(served.headers.get('content-length') !== null, 'the other server cached the large list')
      assert.ok((await served.arrayBuffer()).byteLength > IN_MEMORY_MAX_BYTES)
      assert.deepEqual(onDisk(), [])
    } finally {
      child.kill('SIGKILL')
      await exited
    }
    assert.deepEqual(onDisk(), [], 'a killed server left files in TMPDIR')
  })

  it('closes its files when the server closes', async () => {
    await list()
    await within(15_000, 'the cache file', () => cacheFiles().length === 1, 20)
    await server.close()
    await within(15_000, 'the cache files closed', () => cacheFiles().length === 0, 20)
    assert.deepEqual(onDisk(), [])
  })
})

forEachStore('listOrders caching without a usable temporary directory', (kind) => {
  it('serves a large list, uncached, when no file can be made', async () => {
    const database = await createDatabase(kind) // a SQLite file goes to the temporary directory too
    const notADirectory = join(mkdtempSync(join(tmpdir(), 'list-cache-test-')), 'file')
    writeFileSync(notADirectory, '')
    const restoreTmpdir = useTmpdir(notADirectory)
    try {
      const server = await startTestServer(kind, { database })
      const key = await server.createKey()
      await server.importOrders(Array.from({ length: 40_000 }, (_, i) => ({ id: BigInt(i + 1), quantity: 1 })))
      const list = () => fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': 'identity' } })
      const first = await (await list()).text()
      assert.ok(first.length > IN_MEMORY_MAX_BYTES)
      const second = await list()
      assert.equal(second.status, 200)
      assert.equal(second.headers.get('content-length'), null, 'streamed again: nothing could be cached')
      assert.equal(await second.text(), first)
      await server.close()
    } finally {
      restoreTmpdir()
      rmSync(dirname(notADirectory), { recursive: true, force: true })
      await database.dispose()
    }
  })
})

/** Points os.tmpdir(), which follows TMPDIR, at `path`; returns what puts it back. */
/** The descriptors of this process open on unlinked files that were in `directory`, as /proc/self/fd paths. */
function openUnlinkedFiles(directory: string): string[] {
  const files: string[] = []
  for (const fd of readdirSync('/proc/self/fd')) {
    const target = (() => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`)
      } catch {
        return '' // closed meanwhile (the listing's own descriptor, say)
      }
    })()
    if (target.startsWith(`${directory}/`) && target.endsWith(' (deleted)')) files.push(`/proc/self/fd/${fd}`)
  }
  return files
}

function useTmpdir(path: string): () => void {
  const saved = process.env.TMPDIR
  process.env.TMPDIR = path
  return () => {
    if (saved === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = saved
  }
}

/** GETs the list, reads its first chunk and closes the connection. */
function readSomeThenLeave(origin: string, key: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${origin}/v1/store/orders`, { headers: bearer(key), agent: false }, (res) => {
      res.once('data', () => {
        req.destroy()
        resolve()
      })
    })
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? resolve() : reject(error)))
    req.end()
  })
}
