import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import { bearer, expectError, forEachStore, idsInBody, startTestServer, type TestServer } from './support/harness.js'

const MAX = 9223372036854775807n
const TWO_53 = 2n ** 53n

forEachStore('listOrders', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    await server.importOrders([
      { id: MAX, petId: MAX - 1n, quantity: 3, shipDate: '2026-11-25T10:00:00.000Z', status: 'pending' },
      { id: TWO_53 + 1n, petId: TWO_53 + 1n, quantity: 1, status: 'pending' },
      { id: TWO_53, petId: TWO_53, quantity: 2, status: 'shipped', complete: true },
      { id: 7n, status: 'cancelled' },
      { id: 3n, petId: 11n, quantity: 5, shipDate: '2026-12-01T08:30:00.000Z', status: 'shipped', complete: false },
    ])
  })

  it('returns every order that is not cancelled, ascending id, with exact int64 ids', async () => {
    const response = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    assert.equal(response.status, 200)
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
    const text = await response.text()
    assert.deepEqual(idsInBody(text), ['3', String(TWO_53), String(TWO_53 + 1n), String(MAX)])
    // petIds are exact too: the literal text is in the body, not a rounded double.
    assert.ok(text.includes(`"petId":${MAX - 1n}`), text)
    assert.ok(text.includes(`"petId":${TWO_53 + 1n}`), text)
  })

  it('sends exactly the five Order fields, omitting unknown values instead of null', async () => {
    const response = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    const orders = (await response.json()) as Record<string, unknown>[]
    for (const order of orders) {
      for (const field of Object.keys(order)) assert.ok(['id', 'petId', 'quantity', 'shipDate', 'complete'].includes(field), field)
      for (const value of Object.values(order)) assert.notEqual(value, null)
    }
    assert.deepEqual(orders[0], { id: 3, petId: 11, quantity: 5, shipDate: '2026-12-01T08:30:00.000Z', complete: false })
    assert.deepEqual(Object.keys(orders[2]!).sort(), ['complete', 'id', 'petId', 'quantity'])
    assert.equal(orders[1]!.complete, true)
  })

  it('answers HEAD like GET, without a body', async () => {
    const response = await fetch(`${server.origin}/v1/store/orders`, { method: 'HEAD', headers: bearer(key) })
    assert.equal(response.status, 200)
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
    assert.equal(await response.text(), '')
  })

  it('returns an empty array when there are no orders', async () => {
    const empty = await startTestServer(kind)
    const response = await fetch(`${empty.origin}/v1/store/orders`, { headers: bearer(await empty.createKey()) })
    assert.equal(response.status, 200)
    assert.equal(await response.text(), '[]')
  })

  it('streams a list larger than one batch in order and complete', async () => {
    const big = await startTestServer(kind)
    const count = 2500
    await big.importOrders(Array.from({ length: count }, (_, i) => ({ id: BigInt(count - i), quantity: 1 })))
    const response = await fetch(`${big.origin}/v1/store/orders`, { headers: bearer(await big.createKey()) })
    const ids = idsInBody(await response.text())
    assert.equal(ids.length, count)
    assert.deepEqual(ids, Array.from({ length: count }, (_, i) => String(i + 1)))
  })

  it('needs the orders:read scope', async () => {
    const cancelOnly = await server.createKey({ scopes: ['orders:cancel'] })
    const response = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(cancelOnly) })
    await expectError(response, 403, 'insufficient_scope')
  })
})

forEachStore('cancelOrder', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    await server.importOrders([
      { id: 1n, status: 'pending' },
      { id: 2n, status: 'shipped', complete: true },
      { id: 3n, status: 'cancelled' },
      { id: MAX, status: 'pending' },
      { id: TWO_53 + 1n, status: 'pending' },
      { id: TWO_53, status: 'pending' },
      { id: 100n, status: 'pending' },
    ])
  })

  const cancel = (id: string, headers = bearer(key)) =>
    fetch(`${server.origin}/v1/store/orders/${id}`, { method: 'DELETE', headers })

  it('cancels a pending order: 204 with no body, then it is gone from the list', async () => {
    const response = await cancel('1')
    assert.equal(response.status, 204)
    assert.equal(await response.text(), '')
    assert.equal(response.headers.get('content-type'), null)
    const list = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    assert.ok(!idsInBody(await list.text()).includes('1'))
  })

  it('refuses a shipped order with 409 order_already_shipped, and changes nothing', async () => {
    await expectError(await cancel('2'), 409, 'order_already_shipped')
    const list = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    assert.ok(idsInBody(await list.text()).includes('2'))
  })

  it('answers 404 order_not_found for unknown and already cancelled orders', async () => {
    await expectError(await cancel('3'), 404, 'order_not_found')
    await expectError(await cancel('999'), 404, 'order_not_found')
    await expectError(await cancel('-5'), 404, 'order_not_found')
    await expectError(await cancel('1'), 404, 'order_not_found') // cancelled by the first test
  })

  it('cancels ids at 2^53, 2^53+1 and 2^63−1 exactly (not their neighbours)', async () => {
    assert.equal((await cancel(String(TWO_53 + 1n))).status, 204)
    const list = await (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).text()
    assert.ok(idsInBody(list).includes(String(TWO_53)), 'cancelling 2^53+1 must not touch 2^53')
    assert.equal((await cancel(String(TWO_53))).status, 204)
    assert.equal((await cancel(String(MAX))).status, 204)
    await expectError(await cancel(String(MAX)), 404, 'order_not_found')
  })

  it('rejects ids that are not int64 with 400 invalid_order_id', async () => {
    for (const id of ['9223372036854775808', '-9223372036854775809', 'abc', '1.5', '1e3', '+1', '0x10', '%20', '1%200', '9'.repeat(200)]) {
      await expectError(await cancel(id), 400, 'invalid_order_id')
    }
  })

  it('accepts the int64 minimum and leading zeros as ordinary ids', async () => {
    await expectError(await cancel('-9223372036854775808'), 404, 'order_not_found')
    assert.equal((await cancel('000100')).status, 204)
  })

  it('checks the key before the id: 401 beats 400', async () => {
    await expectError(await cancel('abc', {}), 401, 'unauthorized')
  })

  it('needs the orders:cancel scope and then changes nothing', async () => {
    await server.importOrders([{ id: 200n }])
    const readOnly = await server.createKey({ scopes: ['orders:read'] })
    await expectError(await cancel('200', bearer(readOnly)), 403, 'insufficient_scope')
    assert.equal((await cancel('200')).status, 204)
  })

  it('gives exactly one 204 among 50 concurrent cancels of one order, and 49 404s', async () => {
    await server.importOrders([{ id: 4242n }])
    const statuses = await Promise.all(Array.from({ length: 50 }, () => cancel('4242').then((r) => r.status)))
    assert.equal(statuses.filter((s) => s === 204).length, 1)
    assert.equal(statuses.filter((s) => s === 404).length, 49)
  })

  it('gives each of many concurrent cancels of different orders its own exact outcome', async () => {
    const orders = Array.from({ length: 60 }, (_, i) => ({
      id: BigInt(5000 + i),
      status: (['pending', 'shipped', 'cancelled'] as const)[i % 3]!,
      complete: false,
    }))
    await server.importOrders(orders)
    const statuses = await Promise.all(orders.map((o) => cancel(String(o.id)).then((r) => r.status)))
    assert.deepEqual(statuses, orders.map((o) => ({ pending: 204, shipped: 409, cancelled: 404 })[o.status]))
  })

  it('keeps the cancelled row: nothing is ever hard-deleted', async () => {
    await server.importOrders([{ id: 777n }])
    assert.equal((await cancel('777')).status, 204)
    // Importing it again as pending is refused because the row is still there, cancelled.
    await assert.rejects(server.importOrders([{ id: 777n, status: 'pending' }]), /order 777 is cancelled/)
  })
})
