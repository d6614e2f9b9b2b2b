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
    const ahead = new ReadAhead({ pages: 4, reads: 4 }, { started: (pages) => (counts.started += pages), used: () => counts.used++ }, 50)
    assert.equal(ahead.pagesPerRun, 2, 'a run is at most half of what may be held')
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

    ahead.start('key 1', 'p2', run(['p3']))
    assert.equal(await ahead.take('key 1', 'p2'), undefined, 'a run that does not start with the page asked for')

    ahead.start('key 1', 'p2', run(['p2']))
    await sleep(60)
    assert.equal(await ahead.take('key 1', 'p2'), undefined, 'too old')
    assert.deepEqual(counts, { started: 5, used: 2 })
  })

  it('reads the run after the one being answered from, once, and every page of a walk is used', async () => {
    // A walk of 9 pages in runs of 2 (p1 is the first page, read by the request itself).
    let reads = 0
    const runFrom = (from: number): Promise<Run> => {
      reads++
      const numbers = [from, from + 1].filter((n) => n <= 9)
      return Promise.resolve({ pages: numbers.map((n) => ({ key: `p${n}`, page: n })), readNext: numbers.at(-1)! < 9 ? () => runFrom(from + 2) : undefined })
    }
    const ahead = new ReadAhead({ pages: 4, reads: 4 })
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

  it('holds at most `limits.pages` pages and runs at most `limits.reads` reads at once, each no longer than the time allowed; none with 0 pages', async () => {
    const ahead = new ReadAhead({ pages: 3, reads: 2 }, undefined, 50) // runs of one page
    let finish: (value: Run) => void = () => {}
    ahead.start('a', 'p', () => new Promise((resolve) => (finish = resolve)))
    ahead.start('b', 'p', run(['p']))
    assert.deepEqual(ahead.size, { held: 2, reading: 2 })
    ahead.start('c', 'p', run(['p']))
    assert.equal(await ahead.take('c', 'p'), undefined, 'two reads were running')
    finish({ pages: [{ key: 'p', page: 'A' }] })
    await sleep(0)
    assert.deepEqual(ahead.size, { held: 2, reading: 0 })
    ahead.start('c', 'p', run(['p']))
    ahead.start('d', 'p', run(['p']))
    assert.equal(await ahead.take('d', 'p'), undefined, 'three pages were held')
    await sleep(60)
    assert.deepEqual(ahead.size, { held: 0, reading: 0 }, 'not asked for in time: dropped')
    ahead.start('d', 'p', run(['p']))
    assert.equal((await ahead.take('d', 'p'))?.page, 'P')

    const none = new ReadAhead({ pages: 0, reads: 8 })
    none.start('a', 'p', run(['p']))
    assert.equal(await none.take('a', 'p'), undefined)
  })

  it('keeps no page once it is taken (a walk of a thousand pages a second must not hold them all)', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const ahead = new ReadAhead({ pages: 2, reads: 2 }, undefined, 60_000)
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
      const ahead = new ReadAhead({ pages: 4, reads: 4 }, undefined, 50)
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

  it('READ_AHEAD_PAGES: 32 by default, validated; reads at once below the PostgreSQL pool', () => {
    const postgres = { DATABASE_URL: 'postgres://127.0.0.1/x' }
    assert.deepEqual(loadConfig({}).readAhead, { pages: 32, reads: 8 })
    assert.deepEqual(loadConfig(postgres).readAhead, { pages: 32, reads: 8 })
    assert.deepEqual(loadConfig({ ...postgres, DATABASE_POOL_SIZE: '4' }).readAhead, { pages: 32, reads: 2 })
    assert.deepEqual(loadConfig({ ...postgres, DATABASE_POOL_SIZE: '2', READ_AHEAD_PAGES: '3' }).readAhead, { pages: 3, reads: 0 })
    assert.equal(loadConfig({ READ_AHEAD_PAGES: '0' }).readAhead.pages, 0)
    assert.throws(() => loadConfig({ READ_AHEAD_PAGES: '-1' }), /^ConfigError: READ_AHEAD_PAGES/)
    assert.throws(() => loadConfig({ READ_AHEAD_PAGES: 'many' }), /^ConfigError: READ_AHEAD_PAGES/)
    assert.throws(() => loadConfig({ READ_AHEAD_PAGES: '1001' }), /^ConfigError: READ_AHEAD_PAGES/)
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
        // The third page is being read ahead for this key; the server without read-ahead tells its first order.
        const third = `/v2/store/orders?limit=3&cursor=${second.nextCursor}`
        const target = ids(await (await fetch(`${plain.origin}${third}`, { headers: bearer(key) })).text())[0]!
        await within(2000, 'the third page has been read ahead', () => server.app.readAhead.size.reading === 0)
        assert.ok(server.app.readAhead.size.held > 0, 'pages are held')
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
      await within(2000, 'the second read ahead has run', () => server.app.readAhead.size.reading === 0)
      const counts = await readAheadCounts(server)
      // The empty page was read ahead and not used; the full page of the new event read ahead again.
      assert.deepEqual({ started: counts.started - before.started, used: counts.used - before.used }, { started: 2, used: 0 })
    } finally {
      connection.close()
    }
  })

  it('a walk by fetch, which alternates between two connections, is answered from pages read ahead too, byte for byte what it gets without', async () => {
    const walk = async (origin: string): Promise<string[]> => {
      const pages: string[] = []
      for (let cursor: string | undefined; ; ) {
        const response = await fetch(`${origin}/v2/store/orders?limit=4${cursor === undefined ? '' : `&cursor=${cursor}`}`, { headers: bearer(key) })
        const text = await response.text()
        pages.push(`${response.headers.get('link')} ${text}`)
        cursor = (JSON.parse(text) as { nextCursor?: string }).nextCursor
        if (cursor === undefined) return pages
      }
    }
    const before = await readAheadCounts(server)
    const pages = await walk(server.origin)
    assert.deepEqual(pages, await walk(plain.origin))
    const used = (await readAheadCounts(server)).used - before.used
    // Every page from the third on (the first has no cursor; the second is what reads ahead).
    assert.equal(used, pages.length - 2, `${pages.length} pages, ${used} of them read ahead`)
  })

  it('reads nothing ahead for a first page, nor for a HEAD request, and a HEAD request takes no page read ahead', async () => {
    const before = await readAheadCounts(server)
    for (const path of ['/v2/store/orders?limit=3', '/v2/store/order-events?limit=3']) {
      assert.equal((await fetch(`${server.origin}${path}`, { headers: bearer(key) })).status, 200)
      assert.deepEqual(server.app.readAhead.size, { held: 0, reading: 0 }, path)
    }
    const first = (await (await fetch(`${server.origin}/v2/store/orders?limit=3`, { headers: bearer(key) })).json()) as { nextCursor: string }
    const second = `/v2/store/orders?limit=3&cursor=${first.nextCursor}`
    assert.equal((await fetch(`${server.origin}${second}`, { method: 'HEAD', headers: bearer(key) })).status, 200)
    assert.deepEqual(server.app.readAhead.size, { held: 0, reading: 0 }, 'HEAD')
    assert.deepEqual(await readAheadCounts(server), before)
    // The second page read by GET reads the third ahead; a HEAD of the third leaves it for the GET.
    const third = `/v2/store/orders?limit=3&cursor=${((await (await fetch(`${server.origin}${second}`, { headers: bearer(key) })).json()) as { nextCursor: string }).nextCursor}`
    assert.equal((await fetch(`${server.origin}${third}`, { method: 'HEAD', headers: bearer(key) })).status, 200)
    assert.equal((await readAheadCounts(server)).used, before.used)
    assert.equal((await fetch(`${server.origin}${third}`, { headers: bearer(key) })).status, 200)
    assert.equal((await readAheadCounts(server)).used, before.used + 1)
  })

  it('a store reads several pages at once exactly as it reads them one by one', async () => {
    const events = await server.store.events.read(undefined, 1000)
    assert.ok(events.count >= 30)
    // Every run length and page size, so that what is left is a multiple of the page, one more, and every remainder.
    for (const limit of [1, 5, 7, 10, 29, 30]) {
      for (const pages of [1, 2, 3, 4, 7]) {
        const orders = await server.store.orders.pagesJson({ filters: { statuses: ['pending', 'shipped'] }, after: undefined, limit }, pages)
        const oneByOne = [await server.store.orders.pageJson({ filters: { statuses: ['pending', 'shipped'] }, after: undefined, limit })]
        while (oneByOne.length < pages && oneByOne.at(-1)!.more) oneByOne.push(await server.store.orders.pageJson({ filters: { statuses: ['pending', 'shipped'] }, after: oneByOne.at(-1)!.lastId, limit }))
        const shown = (page: { json: Buffer[]; lastId: bigint | undefined; more: boolean }) => ({ json: Buffer.concat(page.json).toString(), lastId: page.lastId, more: page.more })
        assert.deepEqual(orders.map(shown), oneByOne.map(shown), `orders, limit ${limit}, ${pages} pages`)

        const feed = await server.store.events.readPages(undefined, limit, pages)
        const feedOneByOne = [await server.store.events.read(undefined, limit)]
        while (feedOneByOne.length < pages && feedOneByOne.at(-1)!.count === limit) feedOneByOne.push(await server.store.events.read(feedOneByOne.at(-1)!.next, limit))
        const event = (page: { json: Buffer[]; count: number; next: bigint }) => ({ json: Buffer.concat(page.json).toString(), count: page.count, next: page.next })
        assert.deepEqual(feed.map(event), feedOneByOne.map(event), `events, limit ${limit}, ${pages} pages`)
      }
    }
  })
})
