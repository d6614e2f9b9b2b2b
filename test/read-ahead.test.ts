import assert from 'node:assert/strict'
import { Agent, request } from 'node:http'
import { Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { after, before, describe, it } from 'node:test'
import { loadConfig } from '../src/config.js'
import { ReadAhead } from '../src/http/read-ahead.js'
import { bearer, forEachStore, startTestServer, within, type TestServer } from './support/harness.js'

/** Requests on one keep-alive connection, each told whether it went on the connection before. */
function oneConnection(origin: string, key: string): { send(method: string, path: string): Promise<{ status: number; text: string; reused: boolean }>; close(): void } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  return {
    send: (method, path) =>
      new Promise((resolve, reject) => {
        const req = request(`${origin}${path}`, { method, agent, headers: bearer(key) }, (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => chunks.push(chunk))
          res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString(), reused: req.reusedSocket }))
          res.on('error', reject)
        })
        req.on('error', reject)
        req.end()
      }),
    close: () => agent.destroy(),
  }
}

/** The pages of a walk on one connection, following nextCursor (`param`); every request after the first on the same connection. */
async function walkPages(connection: ReturnType<typeof oneConnection>, path: string, param: string): Promise<string[]> {
  const pages: string[] = []
  let cursor: string | undefined
  for (;;) {
    const page = await connection.send('GET', cursor === undefined ? path : `${path}&${param}=${encodeURIComponent(cursor)}`)
    assert.equal(page.status, 200, page.text)
    if (pages.length > 0) assert.ok(page.reused, 'the walk stays on its connection')
    pages.push(page.text)
    const body = JSON.parse(page.text) as { data: unknown[]; nextCursor?: string }
    if (body.nextCursor === undefined || body.data.length === 0) return pages
    cursor = body.nextCursor
  }
}

const ids = (text: string): string[] => [...text.matchAll(/\{"id":(-?\d+),/g)].map((match) => match[1]!)

async function readAheadCounts(server: TestServer): Promise<{ started: number; used: number }> {
  const text = await (await fetch(`${server.origin}/metrics`)).text()
  const count = (name: string): number => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)![1])
  return { started: count('http_read_ahead_started_total'), used: count('http_read_ahead_used_total') }
}

describe('ReadAhead', () => {
  const page = (value: string) => () => Promise.resolve(value)

  it('gives a page only to the next request of its connection, for that page, within the time, if usable', async () => {
    const counts = { started: 0, used: 0 }
    const ahead = new ReadAhead(4, { started: () => counts.started++, used: () => counts.used++ }, 50)
    const [a, b] = [new Socket(), new Socket()]
    ahead.start(a, 'page 2', page('two'))
    assert.equal(ahead.claim(b), undefined, 'not for another connection')
    assert.equal(await ahead.use(ahead.claim(a), 'page 2'), 'two')
    assert.equal(ahead.claim(a), undefined, 'taken once')

    ahead.start(a, 'page 2', page('two'))
    assert.equal(await ahead.use(ahead.claim(a), 'page 3'), undefined, 'another page')
    assert.equal(ahead.claim(a), undefined, 'and then dropped')

    ahead.start(a, 'page 2', page('two'))
    assert.equal(await ahead.use(ahead.claim(a), 'page 2', (value) => value !== 'two'), undefined, 'refused by the route')

    ahead.start(a, 'page 2', page('two'))
    const held = ahead.claim(a)
    await sleep(60)
    assert.equal(await ahead.use(held, 'page 2'), undefined, 'too old')
    assert.deepEqual(counts, { started: 4, used: 1 })
  })

  it('runs at most `max` reads and holds at most `max` pages, each no longer than the time allowed; none with max 0', async () => {
    const ahead = new ReadAhead(1, undefined, 50)
    const [a, b] = [new Socket(), new Socket()]
    let finish: (value: string) => void = () => {}
    ahead.start(a, 'p', () => new Promise((resolve) => (finish = resolve)))
    ahead.start(b, 'p', page('b'))
    assert.deepEqual(ahead.size, { held: 1, reading: 1 })
    assert.equal(ahead.claim(b), undefined, 'a read was running')
    finish('a')
    await sleep(0)
    assert.deepEqual(ahead.size, { held: 1, reading: 0 })
    ahead.start(b, 'p', page('b'))
    assert.equal(ahead.claim(b), undefined, 'a page was held')
    await sleep(60)
    assert.deepEqual(ahead.size, { held: 0, reading: 0 }, 'not asked for in time: dropped')
    ahead.start(b, 'p', page('b'))
    assert.ok(ahead.claim(b) !== undefined)

    const none = new ReadAhead(0)
    none.start(a, 'p', page('a'))
    assert.equal(none.claim(a), undefined)
  })

  it('keeps no page once it is claimed (a walk of a thousand pages a second must not hold them all)', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const ahead = new ReadAhead(2, undefined, 60_000)
    const socket = new Socket()
    let page: WeakRef<object> | undefined
    await (async () => {
      const value = { bytes: Buffer.alloc(1024) }
      page = new WeakRef(value)
      ahead.start(socket, 'p', () => Promise.resolve(value))
      assert.equal(await ahead.use(ahead.claim(socket), 'p'), value)
    })()
    await sleep(0)
    gc()
    assert.equal(page!.deref(), undefined, 'the page answered its request and is no longer referenced')
  })

  it('a failed read ahead, asked for or not, is no unhandled rejection: the request reads again', async () => {
    const unhandled: unknown[] = []
    const record = (reason: unknown): number => unhandled.push(reason)
    process.on('unhandledRejection', record)
    try {
      const ahead = new ReadAhead(2, undefined, 50)
      const [a, b] = [new Socket(), new Socket()]
      ahead.start(a, 'p', () => Promise.reject(new Error('down')))
      ahead.start(b, 'p', () => {
        throw new Error('down at once')
      })
      assert.equal(await ahead.use(ahead.claim(a), 'p'), undefined)
      await sleep(100) // b's is never asked for
      assert.deepEqual(unhandled, [])
      assert.deepEqual(ahead.size, { held: 0, reading: 0 })
    } finally {
      process.off('unhandledRejection', record)
    }
  })

  it('READ_AHEAD_PAGES: 8 by default, below the PostgreSQL pool, validated', () => {
    const postgres = { DATABASE_URL: 'postgres://127.0.0.1/x' }
    assert.equal(loadConfig({}).readAheadPages, 8)
    assert.equal(loadConfig(postgres).readAheadPages, 8)
    assert.equal(loadConfig({ ...postgres, DATABASE_POOL_SIZE: '4' }).readAheadPages, 2)
    assert.equal(loadConfig({ ...postgres, DATABASE_POOL_SIZE: '1' }).readAheadPages, 0)
    assert.equal(loadConfig({ ...postgres, DATABASE_POOL_SIZE: '4', READ_AHEAD_PAGES: '3' }).readAheadPages, 3)
    assert.throws(() => loadConfig({ ...postgres, DATABASE_POOL_SIZE: '4', READ_AHEAD_PAGES: '4' }), /^ConfigError: READ_AHEAD_PAGES: must be below DATABASE_POOL_SIZE \(4\)/)
    assert.equal(loadConfig({ READ_AHEAD_PAGES: '0' }).readAheadPages, 0)
    assert.throws(() => loadConfig({ READ_AHEAD_PAGES: '-1' }), /^ConfigError: READ_AHEAD_PAGES/)
    assert.throws(() => loadConfig({ READ_AHEAD_PAGES: 'many' }), /^ConfigError: READ_AHEAD_PAGES/)
  })
})

forEachStore('read-ahead over HTTP', (kind) => {
  let server: TestServer
  let plain: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    // The same database served without read-ahead: the same cursors, the same pages.
    plain = await startTestServer(kind, { database: server.database, env: { READ_AHEAD_PAGES: '0' } })
    await server.importOrders(Array.from({ length: 30 }, (_, i) => ({ id: BigInt(i + 1), status: 'pending' as const })))
    key = await server.createKey()
  })
  after(async () => {
    await plain?.close()
    await server?.close()
  })

  it('a walk on one connection is answered from pages read ahead, byte for byte what it gets without', async () => {
    // 30 orders in 6 pages; 30 events in 4 full pages of 7, a page of 2, then an empty one. A page
    // from a cursor that has a next one (orders) or is full (events) reads the next one ahead.
    for (const [path, param, pages, readAhead] of [
      ['/v2/store/orders?limit=5', 'cursor', 6, 4],
      ['/v2/store/order-events?limit=7', 'after', 6, 3],
    ] as const) {
      const before = await readAheadCounts(server)
      const [fast, slow] = [oneConnection(server.origin, key), oneConnection(plain.origin, key)]
      try {
        const walked = await walkPages(fast, path, param)
        assert.equal(walked.length, pages, path)
        assert.deepEqual(walked, await walkPages(slow, path, param), path)
      } finally {
        fast.close()
        slow.close()
      }
      const counts = await readAheadCounts(server)
      assert.deepEqual({ started: counts.started - before.started, used: counts.used - before.used }, { started: readAhead, used: readAhead }, path)
    }
    assert.deepEqual(await readAheadCounts(plain), { started: 0, used: 0 })
  })

  for (const where of ['the same connection', 'another connection'] as const) {
    it(`a page read ahead is not used once an order has changed since: a cancel on ${where}`, async () => {
      const connection = oneConnection(server.origin, key)
      try {
        const first = JSON.parse((await connection.send('GET', '/v2/store/orders?limit=3')).text) as { nextCursor: string }
        const second = JSON.parse((await connection.send('GET', `/v2/store/orders?limit=3&cursor=${first.nextCursor}`)).text) as { nextCursor: string }
        // The third page is being read ahead for this connection; another one reads it to learn its first order.
        const third = `/v2/store/orders?limit=3&cursor=${second.nextCursor}`
        const target = ids(await (await fetch(`${server.origin}${third}`, { headers: bearer(key) })).text())[0]!
        const before = await readAheadCounts(server)
        const cancel =
          where === 'the same connection'
            ? await connection.send('POST', `/v2/store/orders/${target}/cancel`)
            : { status: (await fetch(`${server.origin}/v2/store/orders/${target}/cancel`, { method: 'POST', headers: bearer(key) })).status }
        assert.equal(cancel.status, 200)
        const page = await connection.send('GET', third)
        assert.ok(page.reused)
        assert.ok(!ids(page.text).includes(target), `order ${target} was cancelled before this page was asked for: ${page.text}`)
        assert.equal((await readAheadCounts(server)).used, before.used, 'the page read ahead was not used')
      } finally {
        connection.close()
      }
    })
  }

  it('an empty page of events read ahead is read again: an event committed since is in the answer', async () => {
    const pending = ids(await (await fetch(`${server.origin}/v2/store/orders?limit=1`, { headers: bearer(key) })).text())[0]!
    const connection = oneConnection(server.origin, key)
    try {
      const head = JSON.parse((await connection.send('GET', '/v2/store/order-events?limit=1000')).text) as { nextCursor: string }
      // A full page of one event from the end: the (empty) page after it is read ahead.
      const before = await readAheadCounts(server)
      const last = JSON.parse((await connection.send('GET', `/v2/store/order-events?limit=1&after=${BigInt(head.nextCursor) - 1n}`)).text) as { nextCursor: string }
      assert.equal(last.nextCursor, head.nextCursor)
      // The read ahead has found nothing before the event is committed (else it would hold the event).
      await within(2000, 'the read ahead has run', () => server.app.readAhead.size.reading === 0)
      await server.store.orders.cancel(BigInt(pending), null)
      const page = await connection.send('GET', `/v2/store/order-events?limit=1&after=${last.nextCursor}`)
      assert.match(page.text, new RegExp(`"type":"order.cancelled".*"order":\\{"id":${pending},`))
      const counts = await readAheadCounts(server)
      // The empty page was read ahead and not used; the full page of the new event read ahead again.
      assert.deepEqual({ started: counts.started - before.started, used: counts.used - before.used }, { started: 2, used: 0 })
    } finally {
      connection.close()
    }
  })

  it('reads nothing ahead for a first page, or for a connection that is not kept alive', async () => {
    const before = await readAheadCounts(server)
    const connection = oneConnection(server.origin, key)
    try {
      for (const path of ['/v2/store/orders?limit=3', '/v2/store/order-events?limit=3']) assert.equal((await connection.send('GET', path)).status, 200)
    } finally {
      connection.close()
    }
    const first = (await (await fetch(`${server.origin}/v2/store/orders?limit=3`, { headers: bearer(key) })).json()) as { nextCursor: string }
    const closing = await new Promise<number>((resolve, reject) =>
      request(`${server.origin}/v2/store/orders?limit=3&cursor=${first.nextCursor}`, { agent: false, headers: { ...bearer(key), connection: 'close' } }, (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode!))
      })
        .on('error', reject)
        .end(),
    )
    assert.equal(closing, 200)
    assert.deepEqual(await readAheadCounts(server), before)
  })
})
