import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import Database from 'better-sqlite3'
import pg from 'pg'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { parseExact, type WireOrder } from './support/v2.js'

const MAX = 9223372036854775807n
const TWO_53 = 2n ** 53n
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** One row of SQL on the server's database, on a connection of its own (both stores). */
async function queryRow<R>(server: TestServer, text: string): Promise<R | undefined> {
  const { config } = server.database
  if (config.kind === 'sqlite') {
    const db = new Database(config.path, { readonly: true })
    try {
      return db.prepare(text).get() as R | undefined
    } finally {
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: config.url })
  await client.connect()
  try {
    return (await client.query(text)).rows[0] as R | undefined
  } finally {
    await client.end()
  }
}

async function dataVersion(server: TestServer): Promise<bigint> {
  const row = await queryRow<{ v: string }>(server, 'SELECT CAST(version AS TEXT) AS v FROM data_version')
  return BigInt(row!.v)
}

forEachStore('v2 cancelOrder', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })
    key = await server.createKey()
    await server.importOrders([
      ...Array.from({ length: 40 }, (_, i) => ({ id: BigInt(i + 1), petId: 11n, quantity: 2, shipDate: '2026-11-25T10:00:00.000Z', status: 'pending' as const })),
      { id: 100n, status: 'shipped', complete: true },
      { id: 101n, status: 'cancelled', cancelledAt: '2026-11-20T08:15:00.123Z', cancellationReason: 'duplicate' },
      { id: TWO_53 + 1n, petId: MAX, status: 'pending' },
      { id: MAX, petId: TWO_53 + 1n, quantity: 3, status: 'pending' },
    ])
  })

  /** POST …/cancel; the body as given (a string is sent as is, with the content type given). */
  function cancel(id: bigint | string, init: { body?: string; type?: string | null; key?: string; query?: string } = {}): Promise<Response> {
    const headers: Record<string, string> = { ...bearer(init.key ?? key) }
    const type = init.type === undefined ? (init.body === undefined ? null : 'application/json') : init.type
    if (type !== null) headers['content-type'] = type
    return fetch(`${server.origin}/v2/store/orders/${id}/cancel${init.query ?? ''}`, { method: 'POST', headers, body: init.body })
  }

  async function cancelled(response: Response): Promise<WireOrder> {
    const text = await response.text()
    assert.equal(response.status, 200, text)
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
    return parseExact<WireOrder>(text)
  }

  async function getOrder(id: bigint): Promise<WireOrder> {
    const response = await fetch(`${server.origin}/v2/store/orders/${id}`, { headers: bearer(key) })
    assert.equal(response.status, 200)
    return parseExact<WireOrder>(await response.text())
  }

  it('cancels a pending order: 200 with the order as it now stands, as getOrder then shows it', async () => {
    const version = await dataVersion(server)
    const before = Date.now()
    const order = await cancelled(await cancel(1n, { body: '{"reason":"customer_request"}' }))
    const { cancelledAt, ...rest } = order
    assert.deepEqual(rest, { id: '1', petId: '11', quantity: 2, shipDate: '2026-11-25T10:00:00.000Z', complete: false, status: 'cancelled', version: 2, cancellationReason: 'customer_request' })
    assert.match(cancelledAt ?? '', ISO_MS)
    const at = Date.parse(cancelledAt!)
    assert.ok(at >= before - 1000 && at <= Date.now() + 1000, `${cancelledAt} is now`)
    assert.deepEqual(await getOrder(1n), order)
    assert.equal(await dataVersion(server), version + 1n)
  })

  it('is safe to retry: an order already cancelled is returned as it stands, the first time and reason kept', async () => {
    const first = await cancelled(await cancel(2n, { body: '{"reason":"out_of_stock"}' }))
    const version = await dataVersion(server)
    for (const body of ['{"reason":"fraudulent"}', undefined, '{}']) {
      assert.deepEqual(await cancelled(await cancel(2n, { body })), first, `retry with ${body}`)
    }
    assert.deepEqual(await getOrder(2n), first)
    assert.equal(await dataVersion(server), version, 'a retry changes nothing')
    // An order imported as cancelled, with its time and reason.
    const imported = await cancelled(await cancel(101n, { body: '{"reason":"other"}' }))
    assert.equal(imported.cancelledAt, '2026-11-20T08:15:00.123Z')
    assert.equal(imported.cancellationReason, 'duplicate')
  })

  it('takes no body, an empty one, or {}: the order is cancelled without a reason', async () => {
    const cases: [bigint, { body?: string; type?: string | null }][] = [
      [3n, {}],
      [4n, { body: '', type: 'application/json' }],
      [5n, { body: '{}' }],
      [6n, { body: ' { } ', type: 'application/json; charset=utf-8' }],
      [7n, { body: '', type: 'text/plain' }],
    ]
    for (const [id, init] of cases) {
      const order = await cancelled(await cancel(id, init))
      assert.equal(order.status, 'cancelled', JSON.stringify(init))
      assert.ok(!('cancellationReason' in order), JSON.stringify(order))
      assert.match(order.cancelledAt ?? '', ISO_MS)
    }
  })

  it('int64 ids exact: 2^53+1 and 2^63-1, not their rounded neighbours', async () => {
    const order = await cancelled(await cancel(MAX, { body: '{"reason":"other"}' }))
    assert.equal(order.id, String(MAX))
    assert.equal(order.petId, String(TWO_53 + 1n))
    assert.equal((await cancelled(await cancel(TWO_53 + 1n))).petId, String(MAX))
    await expectError(await cancel(TWO_53), 404, 'order_not_found')
  })

  it('shipped: 409 order_already_shipped; unknown: 404 order_not_found; a bad id: 400 invalid_order_id — nothing changes', async () => {
    const version = await dataVersion(server)
    await expectError(await cancel(100n, { body: '{"reason":"other"}' }), 409, 'order_already_shipped')
    assert.equal((await getOrder(100n)).status, 'shipped')
    await expectError(await cancel(99n), 404, 'order_not_found')
    for (const id of [String(MAX + 1n), '1.0', 'abc', '-9223372036854775809', '0x10']) {
      await expectError(await cancel(id), 400, 'invalid_order_id')
    }
    assert.equal(await dataVersion(server), version)
  })

  const refused: [string, RegExp][] = [
    ['{"reason":"bored"}', /reason.*customer_request/],
    ['{"reason":"Other"}', /reason/],
    ['{"reason":null}', /reason.*null/],
    ['{"reason":5}', /reason/],
    ['{"reason":["other"]}', /reason/],
    ['{"why":"other"}', /"why"/],
    ['{"reason":"other","note":"x"}', /"note"/],
    ['[]', /object.*array/],
    ['[{"reason":"other"}]', /object.*array/],
    ['"other"', /object.*string/],
    ['null', /object.*null/],
    ['5', /object.*number/],
    ['true', /object.*boolean/],
    ['{"reason":', /JSON/],
    ['{reason: "other"}', /JSON/],
  ]
  for (const [body, names] of refused) {
    it(`refuses the body ${body} with 400 invalid_body naming what is wrong; the order stays pending`, async () => {
      const response = await cancel(20n, { body })
      const error = await expectError(response, 400, 'invalid_body')
      assert.match(error.message as string, names)
      assert.equal((await getOrder(20n)).status, 'pending')
    })
  }

  it('refuses a body that is not JSON with 415, and any query parameter with 400 invalid_parameter', async () => {
    await expectError(await cancel(21n, { body: '{"reason":"other"}', type: 'text/plain' }), 415, 'unsupported_media_type')
    await expectError(await cancel(21n, { body: 'reason=other', type: 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type')
    const query = await expectError(await cancel(21n, { query: '?reason=other' }), 400, 'invalid_parameter')
    assert.match(query.message as string, /reason/)
    await expectError(await cancel(21n, { body: 'x'.repeat(20_000) }), 413, 'payload_too_large')
    assert.equal((await getOrder(21n)).status, 'pending')
  })

  it('401 without a valid key, 403 without orders:cancel — before the id or the body is looked at', async () => {
    const response = await fetch(`${server.origin}/v2/store/orders/22/cancel`, { method: 'POST' })
    await expectError(response, 401, 'unauthorized')
    assert.match(response.headers.get('www-authenticate') ?? '', /^Bearer realm="petstore"/)
    await expectError(await cancel(22n, { key: 'pso_0000000000000000000000000000000000000000' }), 401, 'unauthorized')
    const readOnly = await server.createKey({ scopes: ['orders:read', 'pets:read'] })
    await expectError(await cancel(22n, { key: readOnly }), 403, 'insufficient_scope')
    await expectError(await cancel('x', { key: readOnly, body: 'nope' }), 403, 'insufficient_scope')
    await expectError(await fetch(`${server.origin}/v2/store/orders/x/cancel`, { method: 'POST', body: 'nope' }), 401, 'unauthorized')
    assert.equal((await getOrder(22n)).status, 'pending')
  })

  it('a key with orders:cancel but not orders:read: 204 with no body, a retry 204 again; it shows no order, not even one cancelled long ago', async () => {
    const cancelOnly = await server.createKey({ scopes: ['orders:cancel'] })
    async function noContent(response: Response): Promise<void> {
      assert.equal(response.status, 204)
      assert.equal(await response.text(), '')
      assert.equal(response.headers.get('content-type'), null)
    }
    const version = await dataVersion(server)
    await noContent(await cancel(31n, { key: cancelOnly, body: '{"reason":"duplicate"}' }))
    const order = await getOrder(31n)
    assert.equal(order.status, 'cancelled') // the cancel is done, with its reason
    assert.equal(order.cancellationReason, 'duplicate')
    assert.equal(await dataVersion(server), version + 1n)
    await noContent(await cancel(31n, { key: cancelOnly }))
    await noContent(await cancel(101n, { key: cancelOnly })) // imported as cancelled, long ago
    assert.equal(await dataVersion(server), version + 1n, 'a retry changes nothing')
    assert.deepEqual(await getOrder(31n), order)
    // The refusals are as for any key.
    await expectError(await cancel(100n, { key: cancelOnly }), 409, 'order_already_shipped')
    await expectError(await cancel(99n, { key: cancelOnly }), 404, 'order_not_found')
    await expectError(await cancel('x', { key: cancelOnly }), 400, 'invalid_order_id')
  })

  it('answers OPTIONS with Allow, other methods 405 with Allow, unknown paths 404', async () => {
    const path = `${server.origin}/v2/store/orders/23/cancel`
    const options = await fetch(path, { method: 'OPTIONS' })
    assert.equal(options.status, 204)
    assert.equal(options.headers.get('allow'), 'POST, OPTIONS')
    for (const method of ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']) {
      const response = await fetch(path, { method, headers: bearer(key) })
      assert.equal(response.status, 405, method)
      assert.equal(response.headers.get('allow'), 'POST, OPTIONS')
      if (method !== 'HEAD') await expectError(response, 405, 'method_not_allowed')
    }
    await expectError(await fetch(`${server.origin}/v2/store/orders//cancel`, { method: 'POST', headers: bearer(key) }), 404, 'not_found')
    await expectError(await fetch(`${server.origin}/v2/store/orders/23/cancel/now`, { method: 'POST', headers: bearer(key) }), 404, 'not_found')
    await expectError(await fetch(`${server.origin}/v2/store/orders/cancel`, { method: 'POST', headers: bearer(key) }), 405, 'method_not_allowed')
    assert.equal((await getOrder(23n)).status, 'pending')
  })

  it('after v1 DELETE, 200 with the v1 cancellation\'s time (no reason); after a v2 cancel, v1 DELETE is still 404', async () => {
    const v1 = await fetch(`${server.origin}/v1/store/orders/24`, { method: 'DELETE', headers: bearer(key) })
    assert.equal(v1.status, 204)
    const row = await queryRow<{ at: string }>(server, `SELECT ${kind === 'sqlite' ? 'cancelled_at' : `to_char(cancelled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`} AS at FROM orders WHERE id = 24`)
    const order = await cancelled(await cancel(24n, { body: '{"reason":"other"}' }))
    assert.equal(order.cancelledAt, row?.at)
    assert.ok(!('cancellationReason' in order))

    await cancelled(await cancel(25n, { body: '{"reason":"duplicate"}' }))
    const again = await fetch(`${server.origin}/v1/store/orders/25`, { method: 'DELETE', headers: bearer(key) })
    await expectError(again, 404, 'order_not_found')
    assert.equal((await getOrder(25n)).cancellationReason, 'duplicate')
    await expectError(await fetch(`${server.origin}/v1/store/orders/100`, { method: 'DELETE', headers: bearer(key) }), 409, 'order_already_shipped')
  })

  it('stores cancelledAt to the millisecond, exactly what the answer and getOrder show', async () => {
    const order = await cancelled(await cancel(26n))
    if (kind === 'sqlite') {
      assert.equal((await queryRow<{ at: string }>(server, 'SELECT cancelled_at AS at FROM orders WHERE id = 26'))?.at, order.cancelledAt)
    } else {
      // Not a microsecond more: the stored instant is the one shown.
      const row = await queryRow<{ exact: boolean }>(server, `SELECT cancelled_at = '${order.cancelledAt}'::timestamptz AS exact FROM orders WHERE id = 26`)
      assert.equal(row?.exact, true)
    }
    assert.equal((await getOrder(26n)).cancelledAt, order.cancelledAt)
  })

  it('of 50 concurrent cancels of one order, exactly one changes it; all answer 200 with the same order', async () => {
    const version = await dataVersion(server)
    const reasons = ['customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other']
    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => cancel(30n, { body: JSON.stringify({ reason: reasons[i % 5] }) })))
    const orders = await Promise.all(responses.map(cancelled))
    assert.equal(new Set(orders.map((order) => JSON.stringify(order))).size, 1, 'one order, one cancelledAt, one reason')
    assert.deepEqual(await getOrder(30n), orders[0])
    assert.equal(await dataVersion(server), version + 1n, 'one change')
  })
})
