import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { place, post } from './support/place.js'
import { parseExact, type WireOrder } from './support/v2.js'

interface WireEvent {
  type: string
  occurredAt: string
  order: WireOrder & { shippedAt?: string; completedAt?: string }
}

forEachStore('v2 shipOrder and completeOrder', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey({ scopes: ['orders:read', 'orders:cancel', 'orders:write'] })
    await server.importOrders([
      { id: 10n, petId: 1n, quantity: 1, status: 'pending' },
      { id: 11n, petId: 1n, quantity: 1, status: 'shipped' },
      { id: 12n, petId: 1n, quantity: 1, status: 'shipped', complete: true },
      { id: 13n, petId: 1n, quantity: 1, status: 'cancelled' },
      { id: 14n, petId: 1n, quantity: 1, status: 'pending' },
    ])
  })

  it('ships a placed order, then completes it: shippedAt, completedAt, and its events in order, one each', async () => {
    const placed = await place(server.origin, key, '{"petId": 5, "quantity": 2, "shipDate": "2026-12-01T10:00:00Z"}')
    const started = Date.now()
    const shipped = await post(server.origin, key, `/store/orders/${placed.body.id}/ship`)
    assert.equal(shipped.status, 200, shipped.text)
    assert.equal(shipped.body.status, 'shipped')
    assert.equal(shipped.body.complete, false)
    const shippedAt = Date.parse(shipped.body.shippedAt!)
    assert.ok(shippedAt >= started - 1000 && shippedAt <= Date.now() + 1000, shipped.body.shippedAt)
    assert.match(shipped.body.shippedAt!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.equal(shipped.body.completedAt, undefined)
    assert.equal(shipped.text.indexOf('"shippedAt"') > shipped.text.indexOf('"shipDate"'), true, 'optional fields in schema order')

    const completed = await post(server.origin, key, `/store/orders/${placed.body.id}/complete`, '{}')
    assert.equal(completed.status, 200, completed.text)
    assert.equal(completed.body.complete, true)
    assert.equal(completed.body.shippedAt, shipped.body.shippedAt)
    assert.ok(Date.parse(completed.body.completedAt!) >= shippedAt)

    const shown = await fetch(`${server.origin}/v2/store/orders/${placed.body.id}`, { headers: bearer(key) })
    assert.equal(await shown.text(), completed.text, 'getOrder shows it as completeOrder answered')

    const feed = parseExact<{ data: WireEvent[] }>(await (await fetch(`${server.origin}/v2/store/order-events?limit=1000`, { headers: bearer(key) })).text()).data
    const own = feed.filter((event) => event.order.id === placed.body.id)
    assert.deepEqual(own.map((event) => event.type), ['order.created', 'order.shipped', 'order.completed'])
    assert.deepEqual(own[1]!.order, shipped.body)
    assert.deepEqual(own[2]!.order, completed.body)
    assert.equal(own[1]!.occurredAt, shipped.body.shippedAt)
    assert.equal(own[2]!.occurredAt, completed.body.completedAt)
  })

  it('answers a retry with the order as it stands: the first shippedAt and completedAt, no new event', async () => {
    const placed = await place(server.origin, key, '{"petId": 6, "quantity": 1}')
    const first = await post(server.origin, key, `/store/orders/${placed.body.id}/ship`)
    const again = await post(server.origin, key, `/store/orders/${placed.body.id}/ship`, '{}')
    assert.equal(again.status, 200)
    assert.equal(again.text, first.text)
    const done = await post(server.origin, key, `/store/orders/${placed.body.id}/complete`)
    const doneAgain = await post(server.origin, key, `/store/orders/${placed.body.id}/complete`)
    assert.equal(doneAgain.status, 200)
    assert.equal(doneAgain.text, done.text)
    const shippedAgain = await post(server.origin, key, `/store/orders/${placed.body.id}/ship`)
    assert.equal(shippedAgain.text, done.text, 'shipping a complete order answers it as it stands')
    const feed = parseExact<{ data: WireEvent[] }>(await (await fetch(`${server.origin}/v2/store/order-events?limit=1000`, { headers: bearer(key) })).text()).data
    assert.deepEqual(feed.filter((event) => event.order.id === placed.body.id).map((event) => event.type), ['order.created', 'order.shipped', 'order.completed'])
  })

  it('ships and completes imported orders; those imported shipped or complete have no shippedAt or completedAt', async () => {
    const shipped = await post(server.origin, key, '/store/orders/10/ship')
    assert.equal(shipped.status, 200)
    assert.ok(shipped.body.shippedAt !== undefined, 'shipped through the API: shippedAt set')
    const imported = await post(server.origin, key, '/store/orders/11/ship')
    assert.deepEqual([imported.status, imported.body.status, imported.body.shippedAt], [200, 'shipped', undefined])
    const completed = await post(server.origin, key, '/store/orders/11/complete')
    assert.deepEqual([completed.status, completed.body.complete, completed.body.shippedAt], [200, true, undefined])
    assert.ok(completed.body.completedAt !== undefined)
    const complete = await post(server.origin, key, '/store/orders/12/complete')
    assert.deepEqual([complete.status, complete.body.complete, complete.body.completedAt], [200, true, undefined])
  })

  it('refuses what cannot happen: 409 order_cancelled, order_not_shipped, order_already_shipped; 404 order_not_found', async () => {
    const cases: [path: string, status: number, code: string][] = [
      ['/store/orders/13/ship', 409, 'order_cancelled'],
      ['/store/orders/13/complete', 409, 'order_cancelled'],
      ['/store/orders/14/complete', 409, 'order_not_shipped'],
      ['/store/orders/987654321/ship', 404, 'order_not_found'],
      ['/store/orders/987654321/complete', 404, 'order_not_found'],
      ['/store/orders/9223372036854775808/ship', 400, 'invalid_order_id'],
      ['/store/orders/abc/complete', 400, 'invalid_order_id'],
      ['/store/orders/14/ship?force=true', 400, 'invalid_parameter'],
    ]
    for (const [path, status, code] of cases) {
      const answer = await post(server.origin, key, path)
      assert.deepEqual([answer.status, answer.body.code], [status, code], `${path}: ${answer.text}`)
      if (code === 'order_not_found') assert.equal(answer.body.message, 'No order has this id.')
    }
    const pending = await fetch(`${server.origin}/v2/store/orders/14`, { headers: bearer(key) })
    assert.equal(((await pending.json()) as { status: string }).status, 'pending', 'nothing changed')
    // A ship after a cancel, and a cancel after a ship: the loser is 409 with its own code.
    const placed = await place(server.origin, key, '{"petId": 7, "quantity": 1}')
    assert.equal((await post(server.origin, key, `/store/orders/${placed.body.id}/ship`)).status, 200)
    const cancel = await post(server.origin, key, `/store/orders/${placed.body.id}/cancel`)
    assert.deepEqual([cancel.status, cancel.body.code], [409, 'order_already_shipped'])
    // v1 keeps its codes for an order shipped through the API, as for an imported one.
    await expectError(await fetch(`${server.origin}/v1/store/orders/${placed.body.id}`, { method: 'DELETE', headers: bearer(key) }), 409, 'order_already_shipped')
    const stands = await fetch(`${server.origin}/v2/store/orders/${placed.body.id}`, { headers: bearer(key) })
    assert.equal(((await stands.json()) as { status: string }).status, 'shipped', 'nothing changed')
  })

  it('takes no body or {}: anything else is 400 invalid_body, a body that is not JSON 415', async () => {
    for (const path of ['/store/orders/14/ship', '/store/orders/14/complete']) {
      for (const body of ['{"status": "shipped"}', '[]', '"x"', 'null', '{"a":1']) {
        const answer = await post(server.origin, key, path, body)
        assert.deepEqual([answer.status, answer.body.code], [400, 'invalid_body'], `${path} ${body}`)
      }
      const text = await fetch(`${server.origin}/v2${path}`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'text/plain' }, body: 'ship it' })
      await expectError(text, 415, 'unsupported_media_type')
    }
    const pending = await fetch(`${server.origin}/v2/store/orders/14`, { headers: bearer(key) })
    assert.equal(((await pending.json()) as { status: string }).status, 'pending', 'nothing changed')
  })

  it('counts ships and completes by outcome in /metrics', async () => {
    await post(server.origin, key, '/store/orders/13/ship')
    await post(server.origin, key, '/store/orders/14/complete')
    const metrics = await (await fetch(`${server.origin}/metrics`)).text()
    for (const line of ['orders_ship_total{outcome="shipped"}', 'orders_ship_total{outcome="cancelled"}', 'orders_complete_total{outcome="completed"}', 'orders_complete_total{outcome="not_shipped"}']) {
      assert.match(metrics, new RegExp(`^${line.replace(/[{}]/g, '\\$&')} [1-9]`, 'm'), line)
    }
  })
})
