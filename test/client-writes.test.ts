import assert from 'node:assert/strict'
import { createServer, connect, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { before, it } from 'node:test'
// The client's workspace package, as a user imports it: its built dist (npm run build first).
import { createV2Client, type OrderV2, type PetstoreV2Client, type PlaceRetry } from '@petstore-orders/client'
import { DEFAULT_SCOPES } from '../src/domain/api-keys.js'
import { forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { connectSql } from './support/sql.js'
import { expectApiError } from './support/client.js'

const MAX = 9223372036854775807n
const TWO_53 = 2n ** 53n
const ALL_STATUSES = ['pending', 'shipped', 'cancelled'] as const

/**
 * What the proxy does with a connection, in the order connections arrive (then `pass`):
 * - `pass`: forwards both ways;
 * - `reset`: reads the request, forwards nothing, closes the connection (the server never sees it);
 * - `drop`: forwards the request, and closes the connection when the response starts to come back,
 *   before any of it reaches the client (the server has answered: the order is placed);
 * - `cut`: forwards the request, and passes the response's head and one byte of its body, then ends
 *   the connection (the client has the 201 but not the order);
 * - `unavailable`: reads the request and answers 503 itself with `Retry-After: 1`.
 */
type Plan = 'pass' | 'reset' | 'drop' | 'cut' | 'unavailable'

interface Proxy {
  origin: string
  /** Every byte the client sent, and every byte the server answered, one string a connection. */
  requests: string[]
  responses: string[]
  close(): Promise<void>
}

/** A real TCP proxy on 127.0.0.1 in front of `target` (an origin), each connection following `plan`. */
async function startProxy(target: string, plan: Plan[]): Promise<Proxy> {
  const { hostname, port } = new URL(target)
  const requests: string[] = []
  const responses: string[] = []
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const mode = plan.shift() ?? 'pass'
    const index = requests.push('') - 1
    responses.push('')
    sockets.add(client)
    client.on('close', () => sockets.delete(client))
    client.on('error', () => {})
    if (mode === 'reset' || mode === 'unavailable') {
      client.once('data', (chunk: Buffer) => {
        requests[index] += chunk.toString('latin1')
        if (mode === 'reset') return void client.destroy()
        const body = JSON.stringify({ code: 'service_unavailable', message: 'Try again later.', status: 503 })
        client.end(
          `HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
        )
      })
      return
    }
    const upstream = connect(Number(port), hostname)
    sockets.add(upstream)
    upstream.on('close', () => {
      sockets.delete(upstream)
      client.end()
    })
    upstream.on('error', () => client.destroy())
    client.on('close', () => upstream.destroy())
    client.on('data', (chunk: Buffer) => {
      requests[index] += chunk.toString('latin1')
      upstream.write(chunk)
    })
    let held = Buffer.alloc(0)
    upstream.on('data', (chunk: Buffer) => {
      responses[index] += chunk.toString('latin1')
      if (mode === 'pass') return void client.write(chunk)
      if (mode === 'drop') {
        client.destroy()
        return void upstream.destroy()
      }
      held = Buffer.concat([held, chunk])
      const headEnd = held.indexOf('\r\n\r\n')
      if (headEnd >= 0 && held.length > headEnd + 4) {
        client.end(held.subarray(0, headEnd + 5))
        upstream.destroy()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    responses,
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

/** The global fetch, calling `count` before each request. */
function countingFetch(count: () => void): typeof fetch {
  return (input, init) => {
    count()
    return fetch(input, init)
  }
}

/** The Idempotency-Key of each request a proxy saw. */
function keysSent(proxy: Proxy): (string | undefined)[] {
  return proxy.requests.map((text) => /^idempotency-key: *(.*?)\r$/im.exec(text)?.[1])
}

forEachStore('TypeScript client, v2 writes (placeOrder, shipOrder, completeOrder) against a real server', (kind) => {
  let server: TestServer
  let key: string
  let client: PetstoreV2Client
  /** Each test's orders are for pets of its own, to find them again. */
  let nextPet = TWO_53 + 1000n
  const pet = (): bigint => nextPet++
  /** The orders placed for `petId`, every status, read directly (not through a proxy). */
  const ordersOf = async (petId: bigint): Promise<OrderV2[]> => (await client.listOrdersPage({ petId, status: [...ALL_STATUSES] })).data

  before(async () => {
    server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })
    key = await server.createKey()
    // An imported order past 2^53: every placed id is above it.
    await server.importOrders([{ id: TWO_53 + 5n, petId: 1n, quantity: 1, status: 'pending' }])
    client = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: key })
  })

  it('placeOrder: the order as placed, exact past 2^53 (its id above every id held, its pet at the int64 maximum), and as getOrder reads it', async () => {
    const placed = await client.placeOrder({ petId: MAX, quantity: 3, shipDate: new Date('2026-12-01T09:00:00Z') })
    assert.deepEqual(placed, {
      id: TWO_53 + 6n,
      petId: MAX,
      quantity: 3,
      shipDate: '2026-12-01T09:00:00.000Z',
      complete: false,
      status: 'pending',
      version: 1,
    })
    assert.deepEqual(await client.getOrder(placed.id), placed)
    // The next id follows; petId as a decimal string, shipDate as RFC 3339 text, or none.
    const next = await client.placeOrder({ petId: String(MAX - 1n), quantity: 1000, shipDate: '2027-01-02T03:04:05.678Z' })
    assert.deepEqual(next, { id: TWO_53 + 7n, petId: MAX - 1n, quantity: 1000, shipDate: '2027-01-02T03:04:05.678Z', complete: false, status: 'pending', version: 1 })
    const bare = await client.placeOrder({ petId: 7n, quantity: 1 })
    assert.deepEqual(bare, { id: TWO_53 + 8n, petId: 7n, quantity: 1, complete: false, status: 'pending', version: 1 })
  })

  for (const mode of ['drop', 'cut', 'reset'] as const) {
    const what = {
      drop: 'a response lost after the server placed the order',
      cut: 'a 201 whose body was cut off',
      reset: 'a connection closed before the request reached the server',
    }[mode]
    it(`${what}: retried with the same key, and one order is placed`, async () => {
      const proxy = await startProxy(server.origin, [mode])
      try {
        const retries: PlaceRetry[] = []
        const petId = pet()
        const viaProxy = createV2Client({ baseUrl: `${proxy.origin}/v2`, apiKey: key })
        const placed = await viaProxy.placeOrder({ petId, quantity: 2 }, { onRetry: (retry) => void retries.push(retry) })

        assert.equal(retries.length, 1, 'one retry')
        assert.equal(retries[0]!.attempt, 1)
        assert.ok(retries[0]!.error instanceof Error)
        const keys = keysSent(proxy)
        assert.equal(keys.length, 2, 'two requests, each on its own connection')
        assert.match(keys[0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a UUIDv7 made for the call')
        const madeAt = Number.parseInt(keys[0]!.replace('-', '').slice(0, 12), 16)
        assert.ok(Math.abs(madeAt - Date.now()) < 60_000, `its first 48 bits are the time it was made: ${new Date(madeAt).toISOString()}`)
        assert.equal(keys[1], keys[0], 'the retry sends the same key')
        assert.equal(retries[0]!.idempotencyKey, keys[0])
        // The server saw the first request when it was forwarded: the retry is answered by replay.
        const replayed = /^idempotent-replayed: *true\r$/im.test(proxy.responses[1]!)
        assert.equal(replayed, mode !== 'reset', proxy.responses[1])
        if (mode !== 'reset') assert.match(proxy.responses[0]!, /^HTTP\/1\.1 201 /)

        assert.deepEqual(await ordersOf(petId), [placed], 'exactly one order, the one the call resolved with')
        assert.deepEqual(placed, { id: placed.id, petId, quantity: 2, complete: false, status: 'pending', version: 1 })
      } finally {
        await proxy.close()
      }
    })
  }

  it('503 with Retry-After: retried after it, with the same key', async () => {
    const proxy = await startProxy(server.origin, ['unavailable'])
    try {
      const retries: PlaceRetry[] = []
      const petId = pet()
      const viaProxy = createV2Client({ baseUrl: `${proxy.origin}/v2`, apiKey: key })
      const placed = await viaProxy.placeOrder({ petId, quantity: 1 }, { idempotencyKey: 'cart-503', onRetry: (retry) => void retries.push(retry) })
      assert.equal(retries.length, 1)
      assert.equal(retries[0]!.delayMs, 1000, 'Retry-After: 1')
      assert.equal((retries[0]!.error as { status?: number }).status, 503)
      assert.deepEqual(keysSent(proxy), ['cart-503', 'cart-503'])
      assert.deepEqual(await ordersOf(petId), [placed])
    } finally {
      await proxy.close()
    }
  })

  it('attempts are bounded: every connection reset, the call rejects after maxAttempts requests with the last error', async () => {
    const proxy = await startProxy(server.origin, ['reset', 'reset', 'reset', 'reset'])
    try {
      const retries: PlaceRetry[] = []
      const viaProxy = createV2Client({ baseUrl: `${proxy.origin}/v2`, apiKey: key })
      const petId = pet()
      await assert.rejects(viaProxy.placeOrder({ petId, quantity: 1 }, { maxAttempts: 3, onRetry: (retry) => void retries.push(retry) }), TypeError)
      assert.equal(proxy.requests.length, 3)
      assert.deepEqual(retries.map((retry) => retry.attempt), [1, 2])
      assert.equal(new Set(keysSent(proxy)).size, 1, 'one key for every attempt')
      assert.deepEqual(await ordersOf(petId), [])
    } finally {
      await proxy.close()
    }
  })

  it('409 idempotency_key_in_use while the first request with the key is in flight: retried with the same key, answered with that order', async () => {
    // The writers' lock, held by another connection, keeps the first place in flight.
    const sql = await connectSql(server.database)
    let held = true
    const release = async (): Promise<void> => {
      if (!held) return
      held = false
      await sql.query('ROLLBACK')
    }
    try {
      await sql.query(kind === 'sqlite' ? 'BEGIN IMMEDIATE' : 'BEGIN')
      if (kind === 'postgres') await sql.query('SELECT version FROM data_version WHERE id = 1 FOR UPDATE')
      const retries: PlaceRetry[] = []
      const onRetry = (retry: PlaceRetry): void => {
        retries.push(retry)
        void release() // the retry comes after Retry-After (1 s): the first has committed by then
      }
      const petId = pet()
      const body = { petId, quantity: 5 }
      const options = { idempotencyKey: `in-use-${kind}`, onRetry }
      const [first, second] = await Promise.all([client.placeOrder(body, options), client.placeOrder(body, options)])
      assert.equal(retries.length, 1, 'the later of the two was told the key is in use, once')
      await expectApiError(Promise.reject(retries[0]!.error), 409, 'idempotency_key_in_use')
      assert.equal(retries[0]!.delayMs, 1000, 'after its Retry-After')
      assert.equal(retries[0]!.idempotencyKey, `in-use-${kind}`)
      assert.deepEqual(second, first)
      assert.deepEqual(await ordersOf(petId), [first])
    } finally {
      await release()
      await sql.close()
    }
  })

  it("the caller's own key: a second call with it and the same body answers the first call's order, placing nothing", async () => {
    const petId = pet()
    const first = await client.placeOrder({ petId, quantity: 4 }, { idempotencyKey: 'order-form-7f3a' })
    const again = await client.placeOrder({ petId, quantity: 4 }, { idempotencyKey: 'order-form-7f3a' })
    assert.deepEqual(again, first)
    assert.deepEqual(await ordersOf(petId), [first])
  })

  it('400 and 422 are not retried: one request each, nothing placed', async () => {
    const sent: RequestInit[] = []
    const counting = createV2Client({
      baseUrl: `${server.origin}/v2`,
      apiKey: key,
      fetch: (input, init) => {
        sent.push(init ?? {})
        return fetch(input, init)
      },
    })
    const petId = pet()
    await expectApiError(counting.placeOrder({ petId, quantity: 0 }), 400, 'invalid_body')
    assert.equal(sent.length, 1)
    await expectApiError(counting.placeOrder({ petId, quantity: 1, shipDate: 'tomorrow' }), 400, 'invalid_body')
    assert.equal(sent.length, 2)
    const placed = await counting.placeOrder({ petId, quantity: 1 }, { idempotencyKey: 'reused-key' })
    assert.equal(sent.length, 3)
    await expectApiError(counting.placeOrder({ petId, quantity: 2 }, { idempotencyKey: 'reused-key' }), 422, 'idempotency_key_reused')
    assert.equal(sent.length, 4, 'a key used with another body is the caller\'s mistake: not retried')
    assert.deepEqual(await ordersOf(petId), [placed])
  })

  it('a key without orders:write: 403 insufficient_scope, not retried', async () => {
    const readOnly = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey({ scopes: [...DEFAULT_SCOPES] }) })
    const petId = pet()
    await expectApiError(readOnly.placeOrder({ petId, quantity: 1 }), 403, 'insufficient_scope')
    const placed = await client.placeOrder({ petId, quantity: 1 })
    await expectApiError(readOnly.shipOrder(placed.id), 403, 'insufficient_scope')
    await expectApiError(readOnly.completeOrder(placed.id), 403, 'insufficient_scope')
    assert.deepEqual(await ordersOf(petId), [placed], 'still pending')
  })

  it('refused before any request: a number as petId, a bad key, a bad maxAttempts', async () => {
    let sent = 0
    const counting = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: key, fetch: countingFetch(() => sent++) })
    await assert.rejects(counting.placeOrder({ petId: 12 as unknown as bigint, quantity: 1 }), /petId/)
    await assert.rejects(counting.placeOrder({ petId: '1e3', quantity: 1 }), /petId/)
    await assert.rejects(counting.placeOrder({ petId: 1n, quantity: 1 }, { idempotencyKey: 'has space' }), /idempotencyKey/)
    await assert.rejects(counting.placeOrder({ petId: 1n, quantity: 1 }, { idempotencyKey: 'x'.repeat(256) }), /idempotencyKey/)
    await assert.rejects(counting.placeOrder({ petId: 1n, quantity: 1 }, { maxAttempts: 0 }), /maxAttempts/)
    await assert.rejects(counting.shipOrder(1 as unknown as bigint), /the id/)
    assert.equal(sent, 0)
  })

  it('shipOrder and completeOrder: pending → shipped → complete, each safe to retry, with its time', async () => {
    const placed = await client.placeOrder({ petId: pet(), quantity: 1 })
    await expectApiError(client.completeOrder(placed.id), 409, 'order_not_shipped')

    const shipped = await client.shipOrder(placed.id)
    assert.ok(shipped !== undefined, 'a key with orders:read is shown the order')
    assert.equal(shipped.status, 'shipped')
    assert.equal(shipped.complete, false)
    assert.ok(shipped.shippedAt !== undefined && !Number.isNaN(Date.parse(shipped.shippedAt)), 'shippedAt is set')
    assert.deepEqual(shipped, { ...placed, status: 'shipped', shippedAt: shipped.shippedAt, version: 2 })
    assert.deepEqual(await client.shipOrder(placed.id), shipped, 'shipped again: as it stands')

    const completed = await client.completeOrder(String(placed.id))
    assert.ok(completed !== undefined)
    assert.ok(completed.completedAt !== undefined && Date.parse(completed.completedAt) >= Date.parse(shipped.shippedAt!))
    assert.deepEqual(completed, { ...shipped, complete: true, completedAt: completed.completedAt, version: 3 })
    assert.deepEqual(await client.completeOrder(placed.id), completed, 'completed again: as it stands')
    assert.deepEqual(await client.shipOrder(placed.id), completed, 'shipping a complete order: as it stands')
    assert.deepEqual(await client.getOrder(placed.id), completed)
  })

  it('shipOrder and completeOrder with a key without orders:read: undefined (the 204), the order written all the same, a retry likewise', async () => {
    const placed = await client.placeOrder({ petId: pet(), quantity: 1 })
    const writer = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey({ scopes: ['orders:write'] }) })
    assert.equal(await writer.shipOrder(placed.id), undefined)
    assert.equal(await writer.shipOrder(placed.id), undefined)
    assert.equal(await writer.completeOrder(placed.id), undefined)
    assert.equal(await writer.completeOrder(placed.id), undefined)
    const done = await client.getOrder(placed.id)
    assert.deepEqual([done.status, done.complete], ['shipped', true])
    await expectApiError(writer.shipOrder(MAX - 7n), 404, 'order_not_found')
  })

  it('shipOrder and completeOrder: a cancelled order is 409 order_cancelled, an unknown one 404 order_not_found', async () => {
    const placed = await client.placeOrder({ petId: pet(), quantity: 1 })
    const cancelled = await client.cancelOrder(placed.id)
    await expectApiError(client.shipOrder(placed.id), 409, 'order_cancelled')
    await expectApiError(client.completeOrder(placed.id), 409, 'order_cancelled')
    assert.deepEqual(await client.getOrder(placed.id), cancelled)
    await expectApiError(client.shipOrder(MAX - 7n), 404, 'order_not_found')
    await expectApiError(client.completeOrder(MAX - 7n), 404, 'order_not_found')
  })

  // Last: once the store holds the int64 maximum, no order can be placed in it.
  it('the store holds 9223372036854775807: 409 order_ids_exhausted, not retried', async () => {
    await server.importOrders([{ id: MAX, status: 'shipped', complete: true }])
    let sent = 0
    const counting = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: key, fetch: countingFetch(() => sent++) })
    const petId = pet()
    await expectApiError(counting.placeOrder({ petId, quantity: 1 }), 409, 'order_ids_exhausted')
    assert.equal(sent, 1)
    assert.deepEqual(await ordersOf(petId), [])
  })
})
