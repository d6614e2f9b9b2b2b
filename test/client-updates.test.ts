import assert from 'node:assert/strict'
import { before, it } from 'node:test'
// The client's workspace package, as a user imports it: its built dist (npm run build first).
import { createV2Client, type OrderV2, type PetstoreV2Client } from '@petstore-orders/client'
import { forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { expectApiError } from './support/client.js'

const MAX = 9223372036854775807n
const TWO_53 = 2n ** 53n

/** A request as the client sent it: method, URL, headers (lowercase names) and body text. */
interface Sent {
  method: string
  url: string
  headers: Record<string, string>
  body: string | undefined
}

/** The global fetch, recording each request in `sent`. */
function recordingFetch(sent: Sent[]): typeof fetch {
  return (input, init = {}) => {
    sent.push({
      method: init.method ?? 'GET',
      url: String(input),
      headers: Object.fromEntries(new Headers(init.headers).entries()),
      body: typeof init.body === 'string' ? init.body : undefined,
    })
    return fetch(input, init)
  }
}

forEachStore('TypeScript client, v2 updateOrder and If-Match against a real server', (kind) => {
  let server: TestServer
  let key: string
  let client: PetstoreV2Client
  let nextPet = TWO_53 + 5000n
  const pet = (): bigint => nextPet++
  const place = (fields: { quantity?: number; shipDate?: string; metadata?: Record<string, string> } = {}): Promise<OrderV2> =>
    client.placeOrder({ petId: pet(), quantity: fields.quantity ?? 1, ...fields })

  before(async () => {
    server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })
    key = await server.createKey()
    // Every placed id is above this one, past 2^53.
    await server.importOrders([{ id: TWO_53 + 1n, petId: 1n, quantity: 1, status: 'pending' }])
    client = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: key })
  })

  it('without ifMatch: the order as changed and its ETag, the version one more; a merge patch on the wire, petId past 2^53 exact', async () => {
    const placed = await place({ quantity: 2, shipDate: '2026-12-01T10:00:00Z' })
    assert.equal(placed.version, 1)
    assert.ok(placed.id > TWO_53)
    const sent: Sent[] = []
    const recording = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: key, fetch: recordingFetch(sent) })

    const { order, etag } = await recording.updateOrder(placed.id, { petId: TWO_53 + 1n, quantity: 3, shipDate: new Date('2027-01-02T03:04:05.678Z') })
    assert.deepEqual(order, { ...placed, petId: TWO_53 + 1n, quantity: 3, shipDate: '2027-01-02T03:04:05.678Z', version: 2 })
    assert.equal(etag, '"2"')
    assert.equal(sent.length, 1)
    assert.equal(sent[0]!.method, 'PATCH')
    assert.equal(sent[0]!.url, `${server.origin}/v2/store/orders/${placed.id}`)
    assert.equal(sent[0]!.headers['content-type'], 'application/merge-patch+json')
    assert.equal(sent[0]!.headers['if-match'], undefined)
    assert.equal(sent[0]!.body, '{"petId":9007199254740993,"quantity":3,"shipDate":"2027-01-02T03:04:05.678Z"}', 'every digit of petId')
    assert.deepEqual(await client.getOrder(placed.id), order, 'getOrder reads the change, its version too')

    // The int64 maximum as a decimal string; a string id; shipDate removed with null.
    const second = await client.updateOrder(String(placed.id), { petId: String(MAX), shipDate: null })
    assert.equal(second.order?.petId, MAX)
    assert.equal(second.order?.version, 3)
    assert.ok(second.order !== undefined && !('shipDate' in second.order), 'shipDate removed')
    assert.equal(second.etag, '"3"')

    // The feed's order.updated events carry previous, decoded: petId exact as bigint, absent values null.
    const stream = client.events({ wait: 0 })
    const updates: unknown[] = []
    for await (const event of stream) {
      if (event.order.id === placed.id && event.type === 'order.updated') updates.push(event.previous)
      if (updates.length === 2) break
    }
    assert.deepEqual(updates, [
      { petId: placed.petId, quantity: 2, shipDate: '2026-12-01T10:00:00.000Z' },
      { petId: TWO_53 + 1n, shipDate: '2027-01-02T03:04:05.678Z' },
    ])
  })

  it('with ifMatch: the ETag read, or the version, changes it; a stale one is 412 precondition_failed naming the current version, nothing changed', async () => {
    const placed = await place()
    const first = await client.updateOrder(placed.id, { quantity: 5 }, { ifMatch: '"1"' })
    assert.equal(first.order?.quantity, 5)
    assert.equal(first.etag, '"2"')
    const second = await client.updateOrder(placed.id, { quantity: 6 }, { ifMatch: first.etag })
    assert.equal(second.etag, '"3"')
    const third = await client.updateOrder(placed.id, { quantity: 7 }, { ifMatch: second.order!.version })
    assert.equal(third.etag, '"4"')
    assert.equal((await client.updateOrder(placed.id, { quantity: 8 }, { ifMatch: '*' })).etag, '"5"', '* matches any version')

    // A writer still holding version 2 (the ETag of the first change).
    const error = await expectApiError(client.updateOrder(placed.id, { quantity: 9 }, { ifMatch: first.etag }), 412, 'precondition_failed')
    assert.match(error.message, /version 5\b/, error.message)
    const stale = await expectApiError(client.updateOrder(placed.id, { metadata: { note: 'late' } }, { ifMatch: 1 }), 412, 'precondition_failed')
    assert.match(stale.message, /version 5\b/)
    const now = await client.getOrder(placed.id)
    assert.deepEqual([now.quantity, now.version, now.metadata], [8, 5, undefined], 'nothing changed')
    // A weak tag never matches (strong comparison): 412; not an ETag at all: 400. Nothing changed either way.
    await expectApiError(client.updateOrder(placed.id, { quantity: 9 }, { ifMatch: 'W/"5"' }), 412, 'precondition_failed')
    await expectApiError(client.updateOrder(placed.id, { quantity: 9 }, { ifMatch: 'five' }), 400, 'invalid_if_match')
    assert.equal((await client.getOrder(placed.id)).version, 5)
  })

  it('metadata: keys set, replaced and removed (null), the others kept; the last one removed, none shown; changed on a shipped order too', async () => {
    const placed = await place({ metadata: { customer: 'c-1042', channel: 'web' } })
    assert.deepEqual(placed.metadata, { customer: 'c-1042', channel: 'web' })
    const added = await client.updateOrder(placed.id, { metadata: { note: 'gift wrap', channel: 'phone' } })
    assert.deepEqual(added.order?.metadata, { customer: 'c-1042', channel: 'phone', note: 'gift wrap' })
    assert.equal(added.order?.version, 2)
    const removed = await client.updateOrder(placed.id, { metadata: { customer: null, note: null } })
    assert.deepEqual(removed.order?.metadata, { channel: 'phone' })
    // A key named __proto__ is a key like any other, both ways.
    const proto = JSON.parse('{"__proto__": "p", "constructor": "c"}') as Record<string, string>
    const odd = await client.updateOrder(placed.id, { metadata: proto })
    assert.deepEqual(Object.keys(odd.order?.metadata ?? {}), ['channel', '__proto__', 'constructor'])
    assert.equal(Object.getPrototypeOf(odd.order!.metadata), Object.prototype)
    const none = await client.updateOrder(placed.id, { metadata: { channel: null, ['__proto__']: null, constructor: null } })
    assert.ok(none.order !== undefined && !('metadata' in none.order), 'no key left: no metadata')
    assert.equal(none.order.version, 5)

    await client.shipOrder(placed.id)
    const shipped = await client.updateOrder(placed.id, { metadata: { tracking: '1Z999' } })
    assert.deepEqual([shipped.order?.status, shipped.order?.metadata, shipped.etag], ['shipped', { tracking: '1Z999' }, '"7"'])
  })

  it('lists by metadata: metadata[KEY]=VALUE for each key given, every key its own (__proto__ too)', async () => {
    const tag = `t-${kind}-${Date.now()}`
    const withProto = JSON.parse('{"batch": "", "__proto__": "p"}') as Record<string, string> // an own __proto__ key
    withProto.batch = tag
    const both = await place({ metadata: withProto })
    const one = await place({ metadata: { batch: tag } })
    await place({ metadata: { batch: `${tag}-other` } })
    const page = await client.listOrdersPage({ metadata: { batch: tag }, status: ['pending'] })
    assert.deepEqual(page.data.map((order) => order.id), [both.id, one.id])
    assert.deepEqual((await client.listOrdersPage({ metadata: withProto })).data.map((order) => order.id), [both.id])
  })

  it('409 order_not_pending: quantity of a shipped order; a patch that changes nothing answers the order as it is, its version kept', async () => {
    const placed = await place({ quantity: 2 })
    const shipped = await client.shipOrder(placed.id)
    await expectApiError(client.updateOrder(placed.id, { quantity: 3 }), 409, 'order_not_pending')
    assert.deepEqual(await client.getOrder(placed.id), shipped)
    // The values it has already: no change, so no refusal (a retry of a patch that landed).
    const same = await client.updateOrder(placed.id, { quantity: 2 })
    assert.deepEqual(same, { order: shipped, etag: '"2"' })
    assert.deepEqual(await client.updateOrder(placed.id, {}), { order: shipped, etag: '"2"' })
  })

  it('a bad value or an unknown member is 400 invalid_body naming it, nothing changed; unknown order 404', async () => {
    const placed = await place()
    const quantity = await expectApiError(client.updateOrder(placed.id, { quantity: 1001 }), 400, 'invalid_body')
    assert.match(quantity.message, /quantity/)
    const status = await expectApiError(client.updateOrder(placed.id, { status: 'shipped' } as never), 400, 'invalid_body')
    assert.match(status.message, /status/, 'a member the client does not know is sent, for the server to refuse by name')
    const metaKey = await expectApiError(client.updateOrder(placed.id, { metadata: { 'has space': 'x' } }), 400, 'invalid_body')
    assert.match(metaKey.message, /has space/)
    assert.deepEqual(await client.getOrder(placed.id), placed)
    await expectApiError(client.updateOrder(MAX - 3n, { quantity: 1 }), 404, 'order_not_found')
  })

  it('shipOrder, completeOrder and cancelOrder take ifMatch: a stale version is 412 and changes nothing, the current one writes', async () => {
    const placed = await place()
    const { etag } = await client.updateOrder(placed.id, { quantity: 4 })
    await expectApiError(client.shipOrder(placed.id, { ifMatch: '"1"' }), 412, 'precondition_failed')
    await expectApiError(client.cancelOrder(placed.id, { ifMatch: 1, reason: 'duplicate' }), 412, 'precondition_failed')
    assert.equal((await client.getOrder(placed.id)).status, 'pending')
    const shipped = await client.shipOrder(placed.id, { ifMatch: etag })
    assert.deepEqual([shipped?.status, shipped?.version], ['shipped', 3])
    const error = await expectApiError(client.completeOrder(placed.id, { ifMatch: etag }), 412, 'precondition_failed')
    assert.match(error.message, /version 3\b/)
    const completed = await client.completeOrder(placed.id, { ifMatch: shipped!.version })
    assert.deepEqual([completed?.complete, completed?.version], [true, 4])

    const other = await place()
    const cancelled = await client.cancelOrder(other.id, { ifMatch: '"1"', reason: 'customer_request' })
    assert.deepEqual([cancelled?.status, cancelled?.version], ['cancelled', 2])
  })

  it('a key without orders:read: the order is not shown (undefined), its ETag is', async () => {
    const placed = await place()
    const writer = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey({ scopes: ['orders:write'] }) })
    assert.deepEqual(await writer.updateOrder(placed.id, { quantity: 9 }), { order: undefined, etag: '"2"' })
    assert.deepEqual(await writer.updateOrder(placed.id, { quantity: 10 }, { ifMatch: '"2"' }), { order: undefined, etag: '"3"' })
    assert.equal((await client.getOrder(placed.id)).quantity, 10)
  })

  it('refused before any request: a number as id or petId, a bad ifMatch, a patch that is not an object', async () => {
    let sent = 0
    const counting = createV2Client({
      baseUrl: `${server.origin}/v2`,
      apiKey: key,
      fetch: (input, init) => {
        sent++
        return fetch(input, init)
      },
    })
    await assert.rejects(counting.updateOrder(1 as unknown as bigint, {}), /the id/)
    await assert.rejects(counting.updateOrder(1n, { petId: 12 as unknown as bigint }), /petId/)
    await assert.rejects(counting.updateOrder(1n, { petId: '1e3' }), /petId/)
    await assert.rejects(counting.updateOrder(1n, null as never), /patch/)
    await assert.rejects(counting.updateOrder(1n, {}, { ifMatch: 0 }), /ifMatch/)
    await assert.rejects(counting.updateOrder(1n, {}, { ifMatch: 2.5 }), /ifMatch/)
    await assert.rejects(counting.updateOrder(1n, {}, { ifMatch: '' }), /ifMatch/)
    await assert.rejects(counting.shipOrder(1n, { ifMatch: -1 }), /shipOrder: ifMatch/)
    await assert.rejects(counting.completeOrder(1n, { ifMatch: Number.NaN }), /completeOrder: ifMatch/)
    await assert.rejects(counting.cancelOrder(1n, { ifMatch: 1n as never }), /cancelOrder: ifMatch/)
    assert.equal(sent, 0)
  })
})
