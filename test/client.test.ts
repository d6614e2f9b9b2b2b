import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net'
import { after, before, describe, it } from 'node:test'
// The client's workspace package, as a user imports it: its built dist (npm run build first).
import { createClient, createV2Client, RequestTimeoutError, type Order, type PetstoreClient } from '@petstore-orders/client'
import { CLIENT_TYPES_FILE, clientTypesFrom } from '../scripts/generate-client-types.js'
import { expectApiError } from './support/client.js'
import { startTestServer, type TestServer } from './support/harness.js'

const MAX = 9223372036854775807n
const TWO_53 = 2n ** 53n

// The client does not depend on the store, so one store is enough.
describe('TypeScript client (@petstore-orders/client) against a real server', () => {
  let server: TestServer
  let client: PetstoreClient

  before(async () => {
    server = await startTestServer('sqlite')
    client = createClient({ baseUrl: `${server.origin}/v1`, apiKey: await server.createKey() })
    await server.importOrders([
      { id: MAX, petId: MAX - 1n, quantity: 3, shipDate: '2026-11-25T10:00:00.000Z', status: 'pending' },
      { id: TWO_53 + 1n, petId: TWO_53 + 1n, quantity: 1, status: 'pending' },
      { id: TWO_53, petId: TWO_53, quantity: 2, status: 'shipped', complete: true },
      { id: 7n, status: 'cancelled' },
      { id: 3n, petId: 11n, quantity: 5, shipDate: '2026-12-01T08:30:00.000Z', status: 'shipped' },
      { id: 4n, petId: 12n, quantity: 1, status: 'pending' },
    ])
  })

  it('listOrders returns the orders with exact bigint ids, absent fields left out', async () => {
    const orders: Order[] = await client.listOrders()
    assert.deepEqual(orders, [
      { id: 3n, petId: 11n, quantity: 5, shipDate: '2026-12-01T08:30:00.000Z', complete: false },
      { id: 4n, petId: 12n, quantity: 1, complete: false },
      { id: TWO_53, petId: TWO_53, quantity: 2, complete: true },
      { id: TWO_53 + 1n, petId: TWO_53 + 1n, quantity: 1, complete: false },
      { id: MAX, petId: MAX - 1n, quantity: 3, shipDate: '2026-11-25T10:00:00.000Z', complete: false },
    ])
    const id: bigint | undefined = orders[4]?.id // typed bigint, not number
    assert.equal(id, 9223372036854775807n)
    assert.equal(typeof orders[3]!.quantity, 'number')
  })

  it('cancelOrder takes a bigint or a decimal string, resolves with nothing, and the order leaves the list', async () => {
    assert.equal(await client.cancelOrder(TWO_53 + 1n), undefined)
    assert.equal(await client.cancelOrder('9223372036854775807'), undefined)
    const ids = (await client.listOrders()).map((order) => order.id)
    assert.deepEqual(ids, [3n, 4n, TWO_53])
  })

  it('a failed call throws a PetstoreApiError with the status, code and message of the Error body', async () => {
    const notFound = await expectApiError(client.cancelOrder(MAX), 404, 'order_not_found')
    assert.equal(notFound.message, 'The order does not exist or has been cancelled.')
    assert.match(notFound.requestId ?? '', /.+/, 'carries the X-Request-Id')
    await expectApiError(client.cancelOrder(7n), 404, 'order_not_found') // cancelled before
    await expectApiError(client.cancelOrder(123456789n), 404, 'order_not_found') // never existed
    await expectApiError(client.cancelOrder(3n), 409, 'order_already_shipped')
    await expectApiError(client.cancelOrder('abc'), 400, 'invalid_order_id')
    await expectApiError(client.cancelOrder(String(MAX + 1n)), 400, 'invalid_order_id')
    await expectApiError(client.cancelOrder('1/../../4'), 400, 'invalid_order_id') // encoded, not a path
    assert.deepEqual((await client.listOrders()).map((order) => order.id), [3n, 4n, TWO_53], 'order 4 untouched')
  })

  it('401 for a missing, unknown or revoked key; 403 for a key without the scope', async () => {
    const unknown = createClient({ baseUrl: `${server.origin}/v1`, apiKey: 'pso_0000000000000000000000000000000000000000' })
    await expectApiError(unknown.listOrders(), 401, 'unauthorized')
    await expectApiError(unknown.cancelOrder(4n), 401, 'unauthorized')
    const readOnly = createClient({ baseUrl: `${server.origin}/v1`, apiKey: await server.createKey({ scopes: ['orders:read'] }) })
    assert.equal((await readOnly.listOrders()).length, 3)
    await expectApiError(readOnly.cancelOrder(4n), 403, 'insufficient_scope')
    const cancelOnly = createClient({ baseUrl: `${server.origin}/v1`, apiKey: await server.createKey({ scopes: ['orders:cancel'] }) })
    await expectApiError(cancelOnly.listOrders(), 403, 'insufficient_scope')
  })

  it('429 carries Retry-After as retryAfter', async () => {
    const limited = await startTestServer('sqlite', { env: { RATE_LIMIT_PER_KEY: '1' } })
    const limitedClient = createClient({ baseUrl: new URL('/v1/', limited.origin), apiKey: await limited.createKey() })
    await limitedClient.listOrders()
    const error = await expectApiError(limitedClient.listOrders(), 429, 'rate_limited')
    assert.ok(error.retryAfter !== undefined && error.retryAfter > 0, `retryAfter ${error.retryAfter}`)
  })

  it('refuses a number id (not exact past 2^53), a baseUrl that is not a server of the API, and no key', async () => {
    await assert.rejects(client.cancelOrder(4 as unknown as bigint), TypeError)
    assert.throws(() => createClient({ baseUrl: server.origin, apiKey: 'pso_x' }), /ending in \/v1/)
    assert.throws(() => createClient({ baseUrl: 'not a url', apiKey: 'pso_x' }), TypeError)
    assert.throws(() => createClient({ baseUrl: `${server.origin}/v1`, apiKey: '' }), TypeError)
    // With or without the trailing slash.
    const slash = createClient({ baseUrl: `${server.origin}/v1/`, apiKey: await server.createKey() })
    assert.equal((await slash.listOrders()).length, 3)
  })
})

describe('TypeScript client: responses that are not the API', () => {
  let origin: string
  let fake: Server
  const answers: Record<string, { status: number; type: string; body: string }> = {
    '/proxy/v1/store/orders': { status: 502, type: 'text/html', body: '<html>Bad Gateway</html>' },
    '/fraction/v1/store/orders': { status: 200, type: 'application/json', body: '[{"id":1.5}]' },
    '/object/v1/store/orders': { status: 200, type: 'application/json', body: '{"id":1}' },
    '/broken/v1/store/orders': { status: 200, type: 'application/json', body: '[{"id":1' },
    '/html/v1/store/orders': { status: 200, type: 'text/html', body: '[]' },
  }

  before(async () => {
    fake = createServer((request, response) => {
      const answer = answers[request.url ?? ''] ?? { status: 404, type: 'text/plain', body: 'no' }
      response.writeHead(answer.status, { 'content-type': answer.type }).end(answer.body)
    })
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve))
    origin = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`
  })
  after(() => new Promise<void>((resolve) => fake.close(() => resolve())))

  it('an error status without an Error body is unexpected_response with that status', async () => {
    const error = await expectApiError(createClient({ baseUrl: `${origin}/proxy/v1`, apiKey: 'k' }).listOrders(), 502, 'unexpected_response')
    assert.match(error.message, /502/)
  })

  it('a 200 that is not a JSON array of orders is unexpected_response, never a wrong value', async () => {
    for (const prefix of ['fraction', 'object', 'broken', 'html']) {
      await expectApiError(createClient({ baseUrl: `${origin}/${prefix}/v1`, apiKey: 'k' }).listOrders(), 200, 'unexpected_response')
    }
  })
})

describe('TypeScript client: a server that takes the connection and answers nothing', () => {
  let origin: string
  let silent: NetServer
  /** The requests it was sent (their first lines), in order. */
  let received: string[] = []

  before(async () => {
    // A frozen process or a stalled proxy: the connection is accepted, the request read, nothing sent.
    silent = createNetServer((socket) => {
      socket.on('data', (data: Buffer) => received.push(...data.toString('latin1').split('\r\n').filter((line) => /^[A-Z]+ \//.test(line))))
      socket.on('error', () => {})
    })
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    origin = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`
  })
  after(() => new Promise<void>((resolve) => silent.close(() => resolve())))

  it('a call fails with a RequestTimeoutError after the client\'s timeoutMs, v1 and v2 alike', async () => {
    received = []
    const v1 = createClient({ baseUrl: `${origin}/v1`, apiKey: 'pso_k', timeoutMs: 200 })
    await assert.rejects(v1.listOrders(), (error: unknown) => error instanceof RequestTimeoutError && error.timeoutMs === 200)
    const v2 = createV2Client({ baseUrl: `${origin}/v2`, apiKey: 'pso_k', timeoutMs: 150 })
    await assert.rejects(v2.getOrder(1n), (error: unknown) => error instanceof RequestTimeoutError && /no response within 150 ms/.test(error.message))
    assert.deepEqual(received, ['GET /v1/store/orders HTTP/1.1', 'GET /v2/store/orders/1 HTTP/1.1'])
  })

  it('placeOrder retries a request with no response under the same key, then fails with the RequestTimeoutError', async () => {
    received = []
    const v2 = createV2Client({ baseUrl: `${origin}/v2`, apiKey: 'pso_k', timeoutMs: 100 })
    const retries: unknown[] = []
    await assert.rejects(
      v2.placeOrder({ petId: 7n, quantity: 1 }, { idempotencyKey: 'cart-1', maxAttempts: 3, onRetry: ({ error }) => void retries.push(error) }),
      RequestTimeoutError,
    )
    assert.equal(retries.length, 2)
    assert.deepEqual(received, ['POST /v2/store/orders HTTP/1.1', 'POST /v2/store/orders HTTP/1.1', 'POST /v2/store/orders HTTP/1.1'])
  })

  it('the caller\'s signal still aborts first; a timeoutMs that is not a positive number is refused', async () => {
    const v2 = createV2Client({ baseUrl: `${origin}/v2`, apiKey: 'pso_k', timeoutMs: 60_000 })
    const controller = new AbortController()
    const call = v2.getOrder(1n, { signal: controller.signal })
    controller.abort(new Error('the caller gave up'))
    await assert.rejects(call, /the caller gave up/)
    for (const timeoutMs of [0, -1, Number.NaN, '5' as unknown as number]) {
      assert.throws(() => createV2Client({ baseUrl: `${origin}/v2`, apiKey: 'pso_k', timeoutMs }), /timeoutMs: a number of milliseconds above 0, or Infinity/)
    }
  })
})

describe('generated client types', () => {
  it('packages/client/src/openapi-types.ts is what openapi-typescript makes of the served /v1/openapi.json', async () => {
    const server = await startTestServer('sqlite') // the default configuration, as npm run generate:client uses
    const response = await fetch(`${server.origin}/v1/openapi.json`)
    assert.equal(response.status, 200)
    const expected = await clientTypesFrom((await response.json()) as object)
    const committed = readFileSync(CLIENT_TYPES_FILE, 'utf8')
    assert.ok(
      committed === expected,
      'packages/client/src/openapi-types.ts and the served document have drifted apart: run `npm run generate:client` and review the diff',
    )
  })
})
