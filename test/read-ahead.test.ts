import assert from 'node:assert/strict'
import { Agent, request } from 'node:http'
import { Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { READ_AHEAD_TTL_MS, ReadAhead } from '../src/http/read-ahead.js'
import { bearer, forEachStore, startTestServer, type TestServer } from './support/harness.js'

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

  it('gives a page only to the next request of its connection, for that page, within the time', async () => {
    const counts = { started: 0, used: 0 }
    const ahead = new ReadAhead(4, { started: () => counts.started++, used: () => counts.used++ }, 50)
    const [a, b] = [new Socket(), new Socket()]
    ahead.start(a, 'page 2', page('two'))
    assert.equal(ahead.claim(b), undefined, 'not for another connection')
    assert.equal(await ahead.use(ahead.claim(a), 'page 2'), 'two')
    assert.equal(ahead.claim(a), undefined, 'taken once')

    ahead.start(a, 'page 2', page('two'))
    assert.equal(ahead.use(ahead.claim(a), 'page 3'), undefined, 'another page')
    assert.equal(ahead.claim(a), undefined, 'and then dropped')

    ahead.start(a, 'page 2', page('two'))
    const held = ahead.claim(a)
    await sleep(60)
    assert.equal(ahead.use(held, 'page 2'), undefined, 'too old')
    assert.deepEqual(counts, { started: 3, used: 1 })
  })

  it('holds at most `max` pages, making room from those too old; none with max 0', async () => {
    const ahead = new ReadAhead(1, undefined, 50)
    const [a, b] = [new Socket(), new Socket()]
    ahead.start(a, 'p', page('a'))
    ahead.start(b, 'p', page('b'))
    assert.equal(ahead.claim(b), undefined, 'full')
    await sleep(60)
    ahead.start(b, 'p', page('b'))
    assert.equal(ahead.claim(a), undefined, 'the old one made room')
    assert.ok(ahead.claim(b) !== undefined)

    const none = new ReadAhead(0)
    none.start(a, 'p', page('a'))
    assert.equal(none.claim(a), undefined)
  })

  it('a failed read is not an unhandled rejection: the request reads again', async () => {
    const ahead = new ReadAhead(1)
    const socket = new Socket()
    ahead.start(socket, 'p', () => Promise.reject(new Error('down')))
    await assert.rejects(ahead.use(ahead.claim(socket), 'p')!, /down/)
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
    for (const [path, param, pages] of [
      ['/v2/store/orders?limit=5', 'cursor', 6],
      ['/v2/store/order-events?limit=7', 'after', 6], // 30 events: 4 full pages, a page of 2, then an empty one
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
      // Every page with a next one was read ahead, and asked for (the orders' last page has none; the events' page of 2 is not full).
      const expected = path.includes('orders') ? pages - 1 : 4
      assert.deepEqual({ started: counts.started - before.started, used: counts.used - before.used }, { started: expected, used: expected }, path)
    }
    assert.deepEqual(await readAheadCounts(plain), { started: 0, used: 0 })
  })

  it('any other request on the connection drops the page read ahead: a cancel in between is seen', async () => {
    const connection = oneConnection(server.origin, key)
    try {
      const first = JSON.parse((await connection.send('GET', '/v2/store/orders?limit=3')).text) as { nextCursor: string }
      const [next] = ids((await connection.send('GET', `/v2/store/orders?limit=3&cursor=${first.nextCursor}`)).text)
      // The page after `first` is being read ahead; the cancel goes on the same connection first.
      const again = JSON.parse((await connection.send('GET', '/v2/store/orders?limit=3')).text) as { nextCursor: string }
      assert.equal((await connection.send('POST', `/v2/store/orders/${next}/cancel`)).status, 200)
      const page = await connection.send('GET', `/v2/store/orders?limit=3&cursor=${again.nextCursor}`)
      assert.ok(page.reused)
      assert.ok(!ids(page.text).includes(next!), `order ${next} was cancelled before this page was asked for: ${page.text}`)
    } finally {
      connection.close()
    }
  })

  it('a page read ahead longer ago than the time allowed is read again', async () => {
    const connection = oneConnection(server.origin, key)
    try {
      const first = JSON.parse((await connection.send('GET', '/v2/store/orders?limit=3')).text) as { nextCursor: string; data: { id: number }[] }
      // Cancelled on another connection after the next page was read ahead.
      const next = String(first.data.at(-1)!.id + 1)
      const cancel = await fetch(`${server.origin}/v2/store/orders/${next}/cancel`, { method: 'POST', headers: bearer(key) })
      assert.equal(cancel.status, 200)
      await sleep(READ_AHEAD_TTL_MS + 100)
      const page = await connection.send('GET', `/v2/store/orders?limit=3&cursor=${first.nextCursor}`)
      assert.ok(page.reused)
      assert.ok(!ids(page.text).includes(next), `order ${next} was cancelled ${READ_AHEAD_TTL_MS} ms before: ${page.text}`)
    } finally {
      connection.close()
    }
  })

  it('an empty page of events read ahead is read again: an event committed since is in the answer', async () => {
    const pending = ids(await (await fetch(`${server.origin}/v2/store/orders?limit=1`, { headers: bearer(key) })).text())[0]!
    const connection = oneConnection(server.origin, key)
    try {
      const head = JSON.parse((await connection.send('GET', '/v2/store/order-events?limit=1000')).text) as { nextCursor: string }
      // A full page of one event from the end: the (empty) page after it is read ahead.
      const before = await readAheadCounts(server)
      const last = JSON.parse((await connection.send('GET', `/v2/store/order-events?limit=1&after=${BigInt(head.nextCursor) - 1n}`)).text) as { nextCursor: string }
      assert.equal(last.nextCursor, head.nextCursor)
      await server.store.orders.cancel(BigInt(pending), null)
      const page = await connection.send('GET', `/v2/store/order-events?limit=1&after=${last.nextCursor}`)
      assert.match(page.text, new RegExp(`"type":"order.cancelled".*"order":\\{"id":${pending},`))
      const counts = await readAheadCounts(server)
      assert.deepEqual({ started: counts.started - before.started, used: counts.used - before.used }, { started: 2, used: 1 }, 'the empty page was read ahead and asked for (and the full page of the new event reads ahead again)')
    } finally {
      connection.close()
    }
  })
})
