import assert from 'node:assert/strict'
import { Agent, request } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { after, before, beforeEach, describe, it } from 'node:test'
import { loadConfig } from '../src/config.js'
import { ReadAhead, type HeldRuns, type Run } from '../src/http/read-ahead.js'
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
  /** A run of the pages named, each page's value its key in capitals; `next`: the run after it. */
  const run =
    (keys: string[], next?: () => Promise<Run>) =>
    (): Promise<Run> =>
      Promise.resolve({ pages: keys.map((key) => ({ key, page: key.toUpperCase() })), readNext: next })

  it('gives a page only to its holder, for that page, within the time, if usable, and hands on the pages after it', async () => {
    const counts = { started: 0, used: 0 }
    const ahead = new ReadAhead(4, { started: (pages) => (counts.started += pages), used: () => counts.used++ }, 50)
    assert.equal(ahead.run, 2, 'a run is at most half of what may be held')
    ahead.start('key 1', 'p2', run(['p2', 'p3']))
    assert.equal(await ahead.take('key 2', 'p2'), undefined, 'not for another holder')
    assert.equal(await ahead.take('key 1', 'p3'), undefined, 'not for a page that is not next')
    const taken = await ahead.take('key 1', 'p2')
    assert.equal(taken?.page, 'P2')
    assert.equal(await ahead.take('key 1', 'p2'), undefined, 'taken once')
    ahead.start('key 1', 'p3', run(['never read']), taken!.after)
    assert.equal((await ahead.take('key 1', 'p3'))?.page, 'P3', 'the rest of the run, held again')

    ahead.start('key 1', 'p2', run(['p2']))
    assert.equal(await ahead.take('key 1', 'p2', (value) => value !== 'P2'), undefined, 'refused by the route')

    ahead.start('key 1', 'p2', run(['p2']))
    await sleep(60)
    assert.equal(await ahead.take('key 1', 'p2'), undefined, 'too old')
    assert.deepEqual(counts, { started: 4, used: 2 })
  })

  it('reads the run after the one being answered from, once, and every page of a walk is used', async () => {
    // A walk of 9 pages in runs of 2 (p1 is the first page, read by the request itself).
    let reads = 0
    const runFrom = (from: number): Promise<Run> => {
      reads++
      const numbers = [from, from + 1].filter((n) => n <= 9)
      return Promise.resolve({ pages: numbers.map((n) => ({ key: `p${n}`, page: n })), readNext: numbers.at(-1)! < 9 ? () => runFrom(from + 2) : undefined })
    }
    const ahead = new ReadAhead(4)
    let after: HeldRuns = []
    for (let n = 2; n <= 9; n++) {
      const taken = await ahead.take<number>('k', `p${n}`)
      assert.equal(taken?.page, n === 2 ? undefined : n, `page ${n}`)
      if (n < 9) ahead.start('k', `p${n + 1}`, () => runFrom(n + 1), taken?.after ?? [])
      after = taken?.after ?? []
      assert.ok(after.length <= 2, 'one run being answered from, one being read')
      await sleep(0)
    }
    assert.equal(reads, 4, 'p3-p4, p5-p6, p7-p8, p9: each read once')
    assert.deepEqual(ahead.size, { held: 0, reading: 0 })
  })

  it('holds at most `max` pages and reads at most `max` at once, each no longer than the time allowed; none with max 0', async () => {
    const ahead = new ReadAhead(2, undefined, 50) // runs of one page
    let finish: (value: Run) => void = () => {}
    ahead.start('a', 'p', () => new Promise((resolve) => (finish = resolve)))
    ahead.start('b', 'p', run(['p']))
    assert.deepEqual(ahead.size, { held: 2, reading: 2 })
    ahead.start('c', 'p', run(['p']))
    assert.equal(await ahead.take('c', 'p'), undefined, 'two pages were being read')
    finish({ pages: [{ key: 'p', page: 'A' }] })
    await sleep(0)
    assert.deepEqual(ahead.size, { held: 2, reading: 0 })
    ahead.start('c', 'p', run(['p']))
    assert.equal(await ahead.take('c', 'p'), undefined, 'two pages were held')
    await sleep(60)
    assert.deepEqual(ahead.size, { held: 0, reading: 0 }, 'not asked for in time: dropped')
    ahead.start('c', 'p', run(['p']))
    assert.equal((await ahead.take('c', 'p'))?.page, 'P')

    const none = new ReadAhead(0)
    none.start('a', 'p', run(['p']))
    assert.equal(await none.take('a', 'p'), undefined)
  })

  it('keeps no page once it is taken (a walk of a thousand pages a second must not hold them all)', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const ahead = new ReadAhead(2, undefined, 60_000)
    let page: WeakRef<object> | undefined
    await (async () => {
      const value = { bytes: Buffer.alloc(1024) }
      page = new WeakRef(value)
      ahead.start('k', 'p', () => Promise.resolve({ pages: [{ key: 'p', page: value }] }))
      assert.equal((await ahead.take('k', 'p'))?.page, value)
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
      const ahead = new ReadAhead(4, undefined, 50)
      ahead.start('a', 'p', () => Promise.reject(new Error('down')))
      ahead.start('b', 'p', () => {
        throw new Error('down at once')
      })
      assert.equal(await ahead.take('a', 'p'), undefined)
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
  // Pages read ahead that no request took (a walk stopped, a page refused) stay held until their time
  // runs out and count against READ_AHEAD_PAGES: each test starts with none.
  beforeEach(() => within(2000, 'no page held from a previous test', () => server.app.readAhead.size.held === 0 && server.app.readAhead.size.reading === 0))

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

  it('a walk by fetch, which alternates between two connections, is answered from pages read ahead too', async () => {
    const before = await readAheadCounts(server)
    const pages: string[] = []
    for (let cursor: string | undefined; ; ) {
      const response = await fetch(`${server.origin}/v2/store/orders?limit=4${cursor === undefined ? '' : `&cursor=${cursor}`}`, { headers: bearer(key) })
      const page = (await response.json()) as { data: unknown[]; nextCursor?: string }
      pages.push(JSON.stringify(page))
      if (page.nextCursor === undefined) break
      cursor = page.nextCursor
    }
    const counts = await readAheadCounts(server)
    const used = counts.used - before.used
    // Every page from the third on (the first has no cursor; the second is what reads ahead).
    assert.equal(used, pages.length - 2, `${pages.length} pages, ${used} of them read ahead`)
  })

  it('reads nothing ahead for a first page, nor for a HEAD request', async () => {
    const before = await readAheadCounts(server)
    for (const path of ['/v2/store/orders?limit=3', '/v2/store/order-events?limit=3']) {
      assert.equal((await fetch(`${server.origin}${path}`, { headers: bearer(key) })).status, 200)
    }
    const first = (await (await fetch(`${server.origin}/v2/store/orders?limit=3`, { headers: bearer(key) })).json()) as { nextCursor: string }
    assert.equal((await fetch(`${server.origin}/v2/store/orders?limit=3&cursor=${first.nextCursor}`, { method: 'HEAD', headers: bearer(key) })).status, 200)
    await sleep(50)
    assert.deepEqual(await readAheadCounts(server), before)
  })
})
