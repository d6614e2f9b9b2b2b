import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { getPage, parseExact, sql, walk, type WireOrder } from './support/v2.js'

const MAX = 9223372036854775807n
const TWO_53 = 2n ** 53n

forEachStore('v2 listOrders and getOrder', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    await server.importOrders([
      { id: 3n, petId: 11n, quantity: 5, shipDate: '2026-12-01T08:30:00.000Z', status: 'shipped', complete: true },
      { id: 5n, petId: 11n, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z', status: 'pending' },
      { id: 7n, petId: 12n, status: 'cancelled', shipDate: '2026-11-26T00:00:00.000Z' },
      { id: 8n, petId: 12n, status: 'cancelled' },
      { id: 9n, petId: 12n, quantity: 2, status: 'shipped', shipDate: '2026-11-20T00:00:00.000Z' },
      { id: TWO_53 + 1n, petId: TWO_53 + 1n, quantity: 1, status: 'pending' },
      { id: MAX, petId: MAX - 1n, quantity: 3, shipDate: '2026-11-25T10:00:00.001Z', status: 'pending' },
    ])
    await sql(server, `UPDATE orders SET cancellation_reason = 'out_of_stock' WHERE id = 7`)
  })

  const ids = async (query: string): Promise<string[]> => (await getPage(server, key, query)).data.map((order) => order.id)

  it('lists the orders that are not cancelled by default, ascending id, each with its status, int64 exact', async () => {
    const page = await getPage(server, key, '')
    assert.deepEqual(page.data.map((order) => order.id), ['3', '5', '9', String(TWO_53 + 1n), String(MAX)])
    assert.equal(page.nextCursor, undefined)
    assert.equal(page.link, null)
    assert.ok(page.text.includes(`"id":${MAX}`) && page.text.includes(`"petId":${MAX - 1n}`), page.text)
    assert.deepEqual(page.data[0], { id: '3', petId: '11', quantity: 5, shipDate: '2026-12-01T08:30:00.000Z', complete: true, status: 'shipped', version: 1 })
    assert.deepEqual(page.data[3], { id: String(TWO_53 + 1n), petId: String(TWO_53 + 1n), quantity: 1, complete: false, status: 'pending', version: 1 })
    assert.ok(!page.text.includes('null'), page.text)
  })

  it('shows a cancelled order with cancelledAt, and cancellationReason only when one was given', async () => {
    const page = await getPage(server, key, 'status=cancelled')
    assert.deepEqual(page.data.map((order) => order.id), ['7', '8'])
    const [withReason, without] = page.data as [WireOrder, WireOrder]
    assert.equal(withReason.status, 'cancelled')
    assert.equal(withReason.cancellationReason, 'out_of_stock')
    assert.match(withReason.cancelledAt ?? '', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    assert.equal(without.cancellationReason, undefined)
    assert.ok(without.cancelledAt !== undefined)
    assert.deepEqual(Object.keys(without).sort(), ['cancelledAt', 'complete', 'id', 'petId', 'status', 'version'])
  })

  it('filters by status, petId (exact int64), complete and a ship date range', async () => {
    assert.deepEqual(await ids('status=pending'), ['5', String(TWO_53 + 1n), String(MAX)])
    assert.deepEqual(await ids('status=cancelled,shipped'), ['3', '7', '8', '9'])
    assert.deepEqual(await ids('status=pending,shipped,cancelled'), ['3', '5', '7', '8', '9', String(TWO_53 + 1n), String(MAX)])
    assert.deepEqual(await ids(`petId=${MAX - 1n}`), [String(MAX)])
    assert.deepEqual(await ids(`petId=${MAX - 2n}`), []) // a double would round both to the same value
    assert.deepEqual(await ids(`petId=${TWO_53 + 1n}`), [String(TWO_53 + 1n)])
    assert.deepEqual(await ids('petId=12&status=pending,shipped,cancelled'), ['7', '8', '9'])
    assert.deepEqual(await ids('complete=true'), ['3'])
    assert.deepEqual(await ids('complete=false'), ['5', '9', String(TWO_53 + 1n), String(MAX)])
    assert.deepEqual(await ids('complete=true&status=pending'), [])
    // from inclusive, to exclusive, at millisecond precision; orders without a ship date never match
    assert.deepEqual(await ids('shipDateFrom=2026-11-25T10:00:00Z&shipDateTo=2026-11-25T10:00:00.001Z'), ['5'])
    assert.deepEqual(await ids('shipDateFrom=2026-11-25T10:00:00.001Z'), ['3', String(MAX)])
    assert.deepEqual(await ids('shipDateTo=2026-11-25T10:00:00.001Z'), ['5', '9'])
    assert.deepEqual(await ids('shipDateFrom=2026-11-25T10:00:00.0001Z'), ['3', String(MAX)]) // a finer fraction rounds up
    assert.deepEqual(await ids(`shipDateFrom=${encodeURIComponent('2026-11-25T11:00:00+01:00')}&shipDateTo=2026-11-25T10:00:00.001Z`), ['5'])
    assert.deepEqual(await ids('shipDateFrom=2026-11-25T11:00:00+01:00&shipDateTo=2026-11-25T10:00:00.001Z'), ['5']) // `+` sent unencoded
    assert.deepEqual(await ids('status=cancelled&shipDateFrom=2026-11-26T00:00:00Z'), ['7'])
  })

  it('pages with limit, nextCursor exactly when more follow, and a Link keeping the filters', async () => {
    const first = await getPage(server, key, 'limit=2&status=pending,shipped,cancelled&complete=false')
    assert.deepEqual(first.data.map((order) => order.id), ['5', '7'])
    assert.ok(first.nextCursor !== undefined)
    const link = /^<([^>]+)>; rel="next"$/.exec(first.link ?? '')
    assert.ok(link !== null, String(first.link))
    const next = new URL(link[1]!, server.origin)
    assert.equal(next.pathname, '/v2/store/orders')
    assert.deepEqual([...next.searchParams.keys()], ['limit', 'status', 'complete', 'cursor'])
    assert.equal(next.searchParams.get('cursor'), first.nextCursor)
    assert.equal(next.searchParams.get('status'), 'pending,shipped,cancelled')
    const second = await getPage(server, key, next.search.slice(1))
    assert.deepEqual(second.data.map((order) => order.id), ['8', '9'])
    // limit may change between pages; the last page, exactly full, has no cursor
    const last = await getPage(server, key, `limit=2&status=pending,shipped,cancelled&complete=false&cursor=${second.nextCursor}`)
    assert.deepEqual(last.data.map((order) => order.id), [String(TWO_53 + 1n), String(MAX)])
    assert.equal(last.nextCursor, undefined)
    assert.equal(last.link, null)
    const bigger = await getPage(server, key, `limit=1000&status=pending,shipped,cancelled&complete=false&cursor=${first.nextCursor}`)
    assert.deepEqual(bigger.data.map((order) => order.id), ['8', '9', String(TWO_53 + 1n), String(MAX)])
    assert.equal(bigger.nextCursor, undefined)
  })

  it('walks every page at every limit to the same list', async () => {
    const all = ['3', '5', '7', '8', '9', String(TWO_53 + 1n), String(MAX)]
    for (const limit of [1, 2, 3, 6, 7, 8]) {
      const { ids: walked, pages } = await walk(server, key, { status: 'pending,shipped,cancelled' }, () => limit)
      assert.deepEqual(walked, all, `limit ${limit}`)
      assert.equal(pages, Math.max(1, Math.ceil(all.length / limit)), `limit ${limit}`)
    }
  })

  const refused: [string, string][] = [
    ['petid=5', 'petid'],
    ['limit=1&limit=2', 'limit'],
    ['status=pending&status=shipped', 'status'],
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=%2B5', 'limit'],
    ['limit=1e2', 'limit'],
    ['status=', 'status'],
    ['status=open', 'status'],
    ['status=pending,', 'status'],
    ['status=Pending', 'status'],
    ['petId=9223372036854775808', 'petId'],
    ['petId=1e3', 'petId'],
    ['petId=0x10', 'petId'],
    ['petId=', 'petId'],
    ['complete=1', 'complete'],
    ['complete=TRUE', 'complete'],
    ['complete=', 'complete'],
    ['shipDateFrom=2026-11-25', 'shipDateFrom'],
    ['shipDateFrom=2026-13-01T00:00:00Z', 'shipDateFrom'],
    ['shipDateFrom=2026-02-30T00:00:00Z', 'shipDateFrom'],
    ['shipDateFrom=2026-11-25T24:00:00Z', 'shipDateFrom'],
    ['shipDateFrom=2026-11-25T10:00:00', 'shipDateFrom'],
    ['shipDateTo=yesterday', 'shipDateTo'],
    ['shipDateFrom=2026-11-25T10:00:00Z&shipDateTo=2026-11-25T10:00:00Z', 'shipDateTo'],
    ['shipDateFrom=2026-11-26T00:00:00Z&shipDateTo=2026-11-25T00:00:00Z', 'shipDateTo'],
  ]
  for (const [query, parameter] of refused) {
    it(`refuses ?${query} with 400 invalid_parameter naming ${parameter}`, async () => {
      const response = await fetch(`${server.origin}/v2/store/orders?${query}`, { headers: bearer(key) })
      const body = await expectError(response, 400, 'invalid_parameter')
      assert.ok((body.message as string).includes(parameter), `${body.message as string} names ${parameter}`)
    })
  }

  it('accepts the bounds of every parameter', async () => {
    for (const query of ['limit=1', 'limit=1000', `petId=${MAX}`, 'petId=-9223372036854775808', 'petId=007', 'complete=false', 'status=cancelled,pending']) {
      await getPage(server, key, query)
    }
  })

  it('checks the key before the query: 401 and 403 beat 400', async () => {
    await expectError(await fetch(`${server.origin}/v2/store/orders?petid=1`), 401, 'unauthorized')
    const cancelOnly = await server.createKey({ scopes: ['orders:cancel'] })
    await expectError(await fetch(`${server.origin}/v2/store/orders?petid=1`, { headers: bearer(cancelOnly) }), 403, 'insufficient_scope')
    await expectError(await fetch(`${server.origin}/v2/store/orders/3`, { headers: bearer(cancelOnly) }), 403, 'insufficient_scope')
    await expectError(await fetch(`${server.origin}/v2/store/orders/x`), 401, 'unauthorized')
  })

  it('getOrder: any order with its status, cancelled ones included; 404 and 400 otherwise', async () => {
    const response = await fetch(`${server.origin}/v2/store/orders/7`, { headers: bearer(key) })
    assert.equal(response.status, 200)
    const order = parseExact<WireOrder>(await response.text())
    assert.equal(order.status, 'cancelled')
    assert.equal(order.cancellationReason, 'out_of_stock')
    const max = await fetch(`${server.origin}/v2/store/orders/${MAX}`, { headers: bearer(key) })
    const text = await max.text()
    assert.ok(text.startsWith(`{"id":${MAX},`), text)
    await expectError(await fetch(`${server.origin}/v2/store/orders/4`, { headers: bearer(key) }), 404, 'order_not_found')
    await expectError(await fetch(`${server.origin}/v2/store/orders/${MAX + 1n}`, { headers: bearer(key) }), 400, 'invalid_order_id')
    await expectError(await fetch(`${server.origin}/v2/store/orders/1.0`, { headers: bearer(key) }), 400, 'invalid_order_id')
    const withQuery = await expectError(await fetch(`${server.origin}/v2/store/orders/7?status=pending`, { headers: bearer(key) }), 400, 'invalid_parameter')
    assert.match(withQuery.message as string, /status/)
  })

  it('answers HEAD like GET without a body, OPTIONS with Allow, other methods 405 with Allow, unknown paths 404', async () => {
    // The list's path also takes POST (placeOrder: test/v2-place.test.ts), an order's PATCH
    // (updateOrder: test/v2-update.test.ts).
    const allowed = { '/v2/store/orders': ['GET', 'HEAD', 'POST', 'OPTIONS'], '/v2/store/orders/3': ['GET', 'HEAD', 'PATCH', 'OPTIONS'] }
    for (const [path, methods] of Object.entries(allowed)) {
      const head = await fetch(`${server.origin}${path}`, { method: 'HEAD', headers: bearer(key) })
      assert.equal(head.status, 200)
      assert.equal(await head.text(), '')
      const options = await fetch(`${server.origin}${path}`, { method: 'OPTIONS' })
      assert.equal(options.status, 204)
      assert.equal(options.headers.get('allow'), methods.join(', '))
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => !methods.includes(m))) {
        const response = await fetch(`${server.origin}${path}`, { method, headers: bearer(key) })
        assert.equal(response.headers.get('allow'), methods.join(', '))
        await expectError(response, 405, 'method_not_allowed')
      }
    }
    await expectError(await fetch(`${server.origin}/v2/store/orders/3/items`, { headers: bearer(key) }), 404, 'not_found')
    await expectError(await fetch(`${server.origin}/v2/pets/1`, { headers: bearer(key) }), 404, 'not_found')
  })

  it('refuses a cancellation reason outside the five (a CHECK of the schema)', async () => {
    await assert.rejects(sql(server, `UPDATE orders SET cancellation_reason = 'bored' WHERE id = 8`))
    await sql(server, `UPDATE orders SET cancellation_reason = 'duplicate' WHERE id = 8`)
    const order = parseExact<WireOrder>(await (await fetch(`${server.origin}/v2/store/orders/8`, { headers: bearer(key) })).text())
    assert.equal(order.cancellationReason, 'duplicate')
    await sql(server, `UPDATE orders SET cancellation_reason = NULL WHERE id = 8`)
  })
})
