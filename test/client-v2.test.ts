import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { before, describe, it } from 'node:test'
// The client's workspace package, as a user imports it: its built dist (npm run build first).
import { createV2Client, type OrderFilters, type OrderV2, type PetstoreV2Client } from '@petstore-orders/client'
import { CLIENT_V2_TYPES_FILE, clientTypesFrom } from '../scripts/generate-client-types.js'
import type { OrderRecord } from '../src/domain/orders.js'
import { startTestServer, type TestServer } from './support/harness.js'
import { expectApiError } from './support/client.js'

const MAX = 9223372036854775807n
const TWO_53 = 2n ** 53n
const STATUSES = ['pending', 'shipped', 'cancelled'] as const


/**
 * 1,300 orders: small ids, ids just past 2^53 and ids up to the int64 maximum, every status, pets
 * beyond 2^53, ship dates over three months (and some without), complete only when shipped.
 */
function dataset(): OrderRecord[] {
  const ids = [
    ...Array.from({ length: 1000 }, (_, i) => BigInt(3 * i + 1)),
    ...Array.from({ length: 250 }, (_, i) => TWO_53 + BigInt(i)),
    ...Array.from({ length: 50 }, (_, i) => MAX - BigInt(49 - i)),
  ]
  const pets = [11n, 12n, TWO_53 + 1n, MAX - 1n]
  return ids.map((id, i) => {
    const status = STATUSES[i % 3]!
    return {
      id,
      petId: i % 13 === 0 ? null : pets[i % pets.length]!,
      quantity: 1 + (i % 5),
      shipDate: i % 17 === 0 ? null : new Date(Date.UTC(2026, 9, 1) + ((i * 7_919_000_003) % (92 * 86_400_000))).toISOString(),
      complete: status === 'shipped' && i % 2 === 0,
      status,
    }
  })
}

/** The orders of `records` matching `filters`, ascending id, as the API defines the filters. */
function expected(records: OrderRecord[], filters: OrderFilters): bigint[] {
  const statuses: readonly string[] = filters.status ?? ['pending', 'shipped']
  const from = filters.shipDateFrom === undefined ? undefined : new Date(filters.shipDateFrom).getTime()
  const to = filters.shipDateTo === undefined ? undefined : new Date(filters.shipDateTo).getTime()
  return records
    .filter((r) => statuses.includes(r.status))
    .filter((r) => filters.petId === undefined || r.petId === BigInt(filters.petId))
    .filter((r) => filters.complete === undefined || r.complete === filters.complete)
    .filter((r) => from === undefined || (r.shipDate !== null && new Date(r.shipDate).getTime() >= from))
    .filter((r) => to === undefined || (r.shipDate !== null && new Date(r.shipDate).getTime() < to))
    .map((r) => r.id)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}

// The client does not depend on the store, so one store is enough.
describe('TypeScript client, v2 (createV2Client) against a real server', () => {
  let server: TestServer
  let key: string
  let client: PetstoreV2Client
  const records = dataset()
  /** The URLs the client requested, through a fetch that counts them and passes them on. */
  let requested: string[] = []

  before(async () => {
    server = await startTestServer('sqlite', { env: { RATE_LIMIT_PER_KEY: '0' } })
    key = await server.createKey()
    await server.importOrders(records)
    const counting: typeof fetch = (input, init) => {
      requested.push(String(input))
      return fetch(input, init)
    }
    client = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: key, fetch: counting })
  })

  it('the iterator walks every page: every matching order exactly once, ascending, ids beyond 2^53 exact', async () => {
    const cases: OrderFilters[] = [
      {},
      { status: ['pending'] },
      { status: ['cancelled', 'shipped', 'pending'] },
      { petId: TWO_53 + 1n },
      { petId: String(MAX - 1n), status: ['pending', 'shipped', 'cancelled'] },
      { complete: true },
      { complete: false, status: ['shipped'] },
      { shipDateFrom: new Date('2026-10-15T00:00:00Z'), shipDateTo: '2026-11-15T00:00:00Z' },
      { status: ['cancelled'], shipDateFrom: '2026-12-01T00:00:00Z' },
      { petId: 12n, complete: false, shipDateTo: new Date('2026-11-01T00:00:00Z') },
    ]
    for (const filters of cases) {
      const want = expected(records, filters)
      assert.ok(want.length > 0, `${JSON.stringify(filters, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))} matches nothing`)
      for (const pageSize of [97, 1000]) {
        requested = []
        const seen: OrderV2[] = []
        for await (const order of client.orders({ ...filters, pageSize })) seen.push(order)
        assert.deepEqual(seen.map((order) => order.id), want, `pageSize ${pageSize}`)
        assert.equal(requested.length, Math.max(1, Math.ceil(want.length / pageSize)), 'one request a page, following nextCursor')
        for (const order of seen) assert.ok(filters.status === undefined ? order.status !== 'cancelled' : filters.status.includes(order.status))
      }
    }
    // Exact past 2^53, typed bigint: a double would round these ids onto their neighbours.
    const all: bigint[] = []
    for await (const order of client.orders({ status: ['pending', 'shipped', 'cancelled'], pageSize: 1000 })) all.push(order.id)
    assert.equal(all.length, records.length)
    assert.equal(new Set(all).size, records.length)
    assert.ok(all.includes(TWO_53 + 1n) && all.includes(MAX) && all.includes(MAX - 1n))
  })

  it('the iterator with the default page size, and stopping early, sends no more requests than it reads', async () => {
    requested = []
    let count = 0
    for await (const order of client.orders({ status: ['pending', 'shipped', 'cancelled'] })) {
      assert.equal(typeof order.id, 'bigint')
      if (++count === 150) break
    }
    assert.equal(requested.length, 2, requested.join('\n'))
    assert.ok(!new URL(requested[0]!).searchParams.has('limit'), 'the server default, 100 a page')
  })

  it('listOrdersPage: one page with its nextCursor, the next one with the cursor, the last one without', async () => {
    const filters: OrderFilters = { status: ['pending', 'shipped', 'cancelled'], petId: MAX - 1n }
    const want = expected(records, filters)
    const first = await client.listOrdersPage({ ...filters, limit: 3 })
    assert.deepEqual(first.data.map((order) => order.id), want.slice(0, 3))
    assert.equal(typeof first.nextCursor, 'string')
    const second = await client.listOrdersPage({ ...filters, limit: 2, cursor: first.nextCursor })
    assert.deepEqual(second.data.map((order) => order.id), want.slice(3, 5))
    const rest = await client.listOrdersPage({ ...filters, limit: 1000, cursor: second.nextCursor })
    assert.deepEqual(rest.data.map((order) => order.id), want.slice(5))
    assert.equal(rest.nextCursor, undefined)
    assert.ok(!('nextCursor' in rest))

    const [top] = (await client.listOrdersPage({ status: ['pending', 'shipped', 'cancelled'], petId: MAX - 1n, shipDateFrom: '2026-01-01T00:00:00Z', limit: 1, cursor: undefined })).data
    const record = records.find((r) => r.id === top!.id)!
    const wanted: OrderV2 = { id: record.id, petId: MAX - 1n, quantity: record.quantity!, shipDate: record.shipDate!, complete: record.complete, status: record.status, version: 1 }
    if (record.status === 'cancelled') wanted.cancelledAt = top!.cancelledAt
    assert.deepEqual(top, wanted)
  })

  it('getOrder: an order with its status, exact ids, cancelled ones with cancelledAt', async () => {
    const max = await client.getOrder(MAX)
    const record = records.find((r) => r.id === MAX)!
    assert.equal(max.id, 9223372036854775807n)
    assert.equal(max.status, record.status)
    assert.equal(max.petId, record.petId ?? undefined)
    const cancelled = records.find((r) => r.status === 'cancelled' && r.id > TWO_53)!
    const order = await client.getOrder(String(cancelled.id))
    assert.equal(order.id, cancelled.id)
    assert.equal(order.status, 'cancelled')
    assert.match(order.cancelledAt ?? '', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
    const notFound = await expectApiError(client.getOrder(2n), 404, 'order_not_found')
    assert.match(notFound.requestId ?? '', /.+/)
    await expectApiError(client.getOrder(String(MAX + 1n)), 400, 'invalid_order_id')
    await expectApiError(client.getOrder('1/../../4'), 400, 'invalid_order_id') // encoded, not a path
    await assert.rejects(client.getOrder(4 as unknown as bigint), TypeError)
  })

  it('errors: invalid_parameter names the parameter; a cursor used with other filters or altered is invalid_cursor', async () => {
    const limit = await expectApiError(client.listOrdersPage({ limit: 0 }), 400, 'invalid_parameter')
    assert.match(limit.message, /limit/)
    await expectApiError(client.listOrdersPage({ limit: 1001 }), 400, 'invalid_parameter')
    await expectApiError(client.listOrdersPage({ status: [] }), 400, 'invalid_parameter')
    await expectApiError(client.listOrdersPage({ shipDateFrom: 'yesterday' }), 400, 'invalid_parameter')
    await expectApiError(client.listOrdersPage({ shipDateFrom: '2026-11-01T00:00:00Z', shipDateTo: '2026-11-01T00:00:00Z' }), 400, 'invalid_parameter')
    await expectApiError(client.listOrdersPage({ petId: String(MAX + 1n) }), 400, 'invalid_parameter')
    const iterating = async (): Promise<void> => {
      for await (const order of client.orders({ status: ['shipped'], shipDateTo: 'tomorrow' })) assert.fail(`yielded ${order.id}`)
    }
    await expectApiError(iterating(), 400, 'invalid_parameter') // the iterator rejects as the page call does
    await assert.rejects(client.listOrdersPage({ petId: 12 as unknown as bigint }), TypeError)

    const { nextCursor } = await client.listOrdersPage({ status: ['pending'], limit: 2 })
    assert.ok(nextCursor !== undefined)
    await expectApiError(client.listOrdersPage({ status: ['shipped'], cursor: nextCursor }), 400, 'invalid_cursor')
    await expectApiError(client.listOrdersPage({ cursor: nextCursor }), 400, 'invalid_cursor') // default statuses are other filters
    const altered = nextCursor.slice(0, -2) + (nextCursor.endsWith('AA') ? 'AB' : 'AA')
    await expectApiError(client.listOrdersPage({ status: ['pending'], cursor: altered }), 400, 'invalid_cursor')
    await expectApiError(client.listOrdersPage({ status: ['pending'], cursor: 'not-from-this-api' }), 400, 'invalid_cursor')
  })

  it('401 for an unknown key, 403 for a key without orders:read', async () => {
    const unknown = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: 'pso_0000000000000000000000000000000000000000' })
    await expectApiError(unknown.listOrdersPage(), 401, 'unauthorized')
    await expectApiError(unknown.getOrder(1n), 401, 'unauthorized')
    const cancelOnly = createV2Client({ baseUrl: `${server.origin}/v2/`, apiKey: await server.createKey({ scopes: ['orders:cancel'] }) })
    await expectApiError(cancelOnly.orders().next(), 403, 'insufficient_scope')
  })

  it('needs a server URL ending in /v2', () => {
    assert.throws(() => createV2Client({ baseUrl: `${server.origin}/v1`, apiKey: key }), /ending in \/v2/)
    assert.throws(() => createV2Client({ baseUrl: server.origin, apiKey: key }), /ending in \/v2/)
    assert.throws(() => createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: '' }), TypeError)
  })
})

describe('TypeScript client, v2 cancelOrder against a real server', () => {
  let server: TestServer
  let client: PetstoreV2Client

  before(async () => {
    server = await startTestServer('sqlite')
    client = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey() })
    await server.importOrders([
      { id: MAX, petId: MAX - 1n, quantity: 3, status: 'pending' },
      { id: TWO_53 + 1n, status: 'pending' },
      { id: 3n, status: 'shipped', complete: true },
    ])
  })

  it('cancels a pending order with a reason and resolves with it; a retry resolves with it as it stands', async () => {
    const cancelled = await client.cancelOrder(MAX, { reason: 'out_of_stock' })
    assert.ok(cancelled !== undefined, 'a key with orders:read is shown the order')
    assert.equal(cancelled.id, MAX)
    assert.equal(cancelled.petId, MAX - 1n)
    assert.equal(cancelled.status, 'cancelled')
    assert.equal(cancelled.cancellationReason, 'out_of_stock')
    assert.match(cancelled.cancelledAt ?? '', /^\d{4}-\d{2}-\d{2}T/)
    const again = await client.cancelOrder(String(MAX), { reason: 'duplicate' })
    assert.deepEqual(again, cancelled, 'the first cancellation\'s time and reason')
    assert.deepEqual(await client.getOrder(MAX), cancelled)
  })

  it('without a reason, the order has none', async () => {
    const cancelled = await client.cancelOrder(TWO_53 + 1n)
    assert.ok(cancelled !== undefined)
    assert.equal(cancelled.id, TWO_53 + 1n)
    assert.equal(cancelled.status, 'cancelled')
    assert.equal(cancelled.cancellationReason, undefined)
  })

  it('a key without orders:read: the cancel is done and resolves with undefined (204), a retry too; errors as for any key', async () => {
    await server.importOrders([{ id: 41n, petId: 7n, quantity: 1, status: 'pending' }])
    const cancelOnly = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey({ scopes: ['orders:cancel'] }) })
    assert.equal(await cancelOnly.cancelOrder(41n, { reason: 'duplicate' }), undefined)
    assert.equal(await cancelOnly.cancelOrder(41n), undefined, 'a retry')
    const stored = await client.getOrder(41n)
    assert.equal(stored.status, 'cancelled')
    assert.equal(stored.cancellationReason, 'duplicate')
    await expectApiError(cancelOnly.cancelOrder(3n), 409, 'order_already_shipped')
    await expectApiError(cancelOnly.cancelOrder(123456789n), 404, 'order_not_found')
  })

  it('shipped: 409 order_already_shipped; unknown: 404 order_not_found; a bad id or reason: 400', async () => {
    await expectApiError(client.cancelOrder(3n, { reason: 'other' }), 409, 'order_already_shipped')
    await expectApiError(client.cancelOrder(123456789n), 404, 'order_not_found')
    await expectApiError(client.cancelOrder(String(MAX + 1n)), 400, 'invalid_order_id')
    await expectApiError(client.cancelOrder(3n, { reason: 'bored' as 'other' }), 400, 'invalid_body')
    await assert.rejects(client.cancelOrder(4 as unknown as bigint), TypeError)
    assert.equal((await client.getOrder(3n)).status, 'shipped')
  })
})

describe('generated client types, v2', () => {
  it('packages/client/src/openapi-v2-types.ts is what openapi-typescript makes of the served /v2/openapi.json', async () => {
    const server = await startTestServer('sqlite') // the default configuration, as npm run generate:client uses
    const response = await fetch(`${server.origin}/v2/openapi.json`)
    assert.equal(response.status, 200)
    const expected = await clientTypesFrom((await response.json()) as object, 'v2')
    assert.ok(
      readFileSync(CLIENT_V2_TYPES_FILE, 'utf8') === expected,
      'packages/client/src/openapi-v2-types.ts and the served document have drifted apart: run `npm run generate:client` and review the diff',
    )
  })
})
