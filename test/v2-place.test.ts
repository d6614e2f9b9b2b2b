import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import { INT64_MAX } from '../src/domain/int64.js'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { place, post } from './support/place.js'
import { rawRequest, parseRawResponse } from './support/raw-http.js'
import { parseExact, sql, type WireOrder } from './support/v2.js'

const BIG_PET = '9007199254740993' // 2^53 + 1: a double would make it …992

interface WireEvent {
  id: string
  type: string
  order: WireOrder
}

async function events(server: TestServer, key: string): Promise<WireEvent[]> {
  const response = await fetch(`${server.origin}/v2/store/order-events?limit=1000`, { headers: bearer(key) })
  assert.equal(response.status, 200)
  return parseExact<{ data: WireEvent[] }>(await response.text()).data
}

async function orderCount(server: TestServer, key: string): Promise<number> {
  const response = await fetch(`${server.origin}/v2/store/orders?status=pending,shipped,cancelled&limit=1000`, { headers: bearer(key) })
  return ((await response.json()) as { data: unknown[] }).data.length
}

forEachStore('v2 placeOrder', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey({ scopes: ['orders:read', 'orders:write'] })
    await server.importOrders([{ id: 1000n, petId: 5n, quantity: 1, status: 'shipped', complete: true }])
  })

  it('places a pending order above every id held: 201, Location, the Order, petId exact past 2^53, shipDate in UTC', async () => {
    const answer = await place(server.origin, key, `{"petId": ${BIG_PET}, "quantity": 3, "shipDate": "2026-12-01T11:30:00+01:00"}`)
    assert.equal(answer.status, 201, answer.text)
    assert.equal(answer.body.id, '1001', 'the id after the greatest imported one')
    assert.equal(answer.headers.get('location'), '/v2/store/orders/1001')
    assert.equal(answer.headers.get('idempotent-replayed'), null)
    assert.equal(
      answer.text,
      `{"id":1001,"complete":false,"status":"pending","version":1,"petId":${BIG_PET},"quantity":3,"shipDate":"2026-12-01T10:30:00.000Z"}`,
    )
    assert.equal(answer.headers.get('etag'), '"1"')
    const shown = await fetch(`${server.origin}${answer.headers.get('location')!}`, { headers: bearer(key) })
    assert.equal(await shown.text(), answer.text, 'getOrder shows it as placed')
    const second = await place(server.origin, key, '{"petId": 1, "quantity": 1000}')
    assert.equal(second.status, 201, second.text)
    assert.equal(second.body.id, '1002', 'ids of successive places are consecutive')
    assert.equal(second.body.shipDate, undefined, 'no shipDate given: none, omitted')
  })

  it('writes exactly one order.created per placed order, with the order as placed', async () => {
    const placed = await place(server.origin, key, '{"petId": 77, "quantity": 2}')
    assert.equal(placed.status, 201)
    const created = (await events(server, key)).filter((event) => event.order.id === placed.body.id)
    assert.deepEqual(created.map((event) => event.type), ['order.created'])
    assert.deepEqual(created[0]!.order, placed.body)
  })

  it('shows a placed order in the v1 list, v2 pages and filters exactly like an imported one', async () => {
    const placed = await place(server.origin, key, '{"petId": 4242, "quantity": 5, "shipDate": "2027-01-02T03:04:05Z"}')
    assert.equal(placed.status, 201)
    const twin = BigInt(placed.body.id) + 100_000n
    await server.importOrders([{ id: twin, petId: 4242n, quantity: 5, shipDate: '2027-01-02T03:04:05.000Z', status: 'pending' }])
    const readKey = await server.createKey()
    const v1 = await (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(readKey) })).text()
    const v1Orders = parseExact<WireOrder[]>(v1)
    const v1Placed = v1Orders.find((order) => order.id === placed.body.id)
    const v1Twin = v1Orders.find((order) => order.id === String(twin))
    assert.deepEqual({ ...v1Placed, id: 'x' }, { ...v1Twin, id: 'x' })
    const filtered = parseExact<{ data: WireOrder[] }>(
      await (
        await fetch(`${server.origin}/v2/store/orders?petId=4242&complete=false&shipDateFrom=2027-01-01T00:00:00Z&status=pending`, { headers: bearer(readKey) })
      ).text(),
    ).data
    assert.deepEqual(filtered.map((order) => order.id), [placed.body.id, String(twin)])
    assert.deepEqual({ ...filtered[0], id: 'x' }, { ...filtered[1], id: 'x' })
    assert.deepEqual(filtered[0], placed.body)
  })

  it('refuses a bad body with 400 invalid_body naming the field, and places nothing', async () => {
    const before = await orderCount(server, key)
    const cases: [body: string, field: RegExp][] = [
      ['{"quantity": 1}', /"petId" is required/],
      ['{"petId": 1}', /"quantity" is required/],
      ['{"petId": 1, "quantity": 1, "complete": true}', /"complete"/],
      ['{"petId": 1, "quantity": 1, "id": 5}', /"id"/],
      ['{"petId": 1, "quantity": 0}', /"quantity" must be an integer from 1 to 1000; got 0/],
      ['{"petId": 1, "quantity": 1001}', /"quantity".*got 1001/],
      ['{"petId": 1, "quantity": 1.5}', /"quantity".*got 1\.5/],
      ['{"petId": 1, "quantity": "2"}', /"quantity".*got "2"/],
      ['{"petId": 1, "quantity": 1e2}', /"quantity"/],
      ['{"petId": 1, "quantity": null}', /"quantity"/],
      ['{"petId": 9223372036854775808, "quantity": 1}', /"petId" must be an integer from 1 to 9223372036854775807; got 9223372036854775808/],
      ['{"petId": 0, "quantity": 1}', /"petId"/],
      ['{"petId": -1, "quantity": 1}', /"petId"/],
      ['{"petId": "12", "quantity": 1}', /"petId".*got "12"/],
      ['{"petId": 1.0, "quantity": 1}', /"petId"/],
      ['{"petId": 1, "quantity": 1, "shipDate": "2026-13-01T00:00:00Z"}', /"shipDate" must be an RFC 3339 date-time/],
      ['{"petId": 1, "quantity": 1, "shipDate": "2026-12-01"}', /"shipDate"/],
      ['{"petId": 1, "quantity": 1, "shipDate": "2026-12-01T10:00:00"}', /"shipDate"/],
      ['{"petId": 1, "quantity": 1, "shipDate": 1764583200}', /"shipDate"/],
      ['{"petId": 1, "quantity": 1, "shipDate": null}', /"shipDate"/],
      ['{"petId": 1, "quantity": 1, "quantity": 2}', /"quantity" appears twice/],
      ['[{"petId": 1, "quantity": 1}]', /JSON object/],
      ['42', /JSON object.*a number/],
      ['null', /JSON object/],
      ['{"petId": 1, "quantity": 1', /not valid JSON/],
      ['{}', /"petId" is required/],
    ]
    for (const [body, field] of cases) {
      const response = await post(server.origin, key, '/store/orders', body)
      assert.equal(response.status, 400, `${body}: ${response.text}`)
      assert.equal(response.body.code, 'invalid_body', body)
      assert.match(response.body.message!, field, body)
    }
    // No body, or an empty one: what it must have, and shipDate as the option it is.
    for (const headers of [bearer(key), { ...bearer(key), 'content-type': 'application/json' }]) {
      const none = await fetch(`${server.origin}/v2/store/orders`, { method: 'POST', headers })
      assert.equal((await expectError(none, 400, 'invalid_body')).message, 'The body is required, with "petId" and "quantity" (and optionally "shipDate" and "metadata").')
    }
    const text = await fetch(`${server.origin}/v2/store/orders`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'text/plain' }, body: '{"petId":1,"quantity":1}' })
    await expectError(text, 415, 'unsupported_media_type')
    const form = await fetch(`${server.origin}/v2/store/orders`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/x-www-form-urlencoded' }, body: 'petId=1&quantity=1' })
    await expectError(form, 415, 'unsupported_media_type')
    const query = await post(server.origin, key, '/store/orders?dryRun=true', '{"petId": 1, "quantity": 1}')
    assert.deepEqual([query.status, query.body.code], [400, 'invalid_parameter'])
    assert.equal(await orderCount(server, key), before, 'nothing placed')
  })

  it('refuses a bad Idempotency-Key with 400 invalid_idempotency_key, and places nothing', async () => {
    const before = await orderCount(server, key)
    const body = '{"petId": 1, "quantity": 1}'
    for (const bad of ['', 'x'.repeat(256), 'with space', 'tab\there', 'a, b']) {
      const answer = await place(server.origin, key, body, bad)
      assert.deepEqual([answer.status, answer.body.code], [400, 'invalid_idempotency_key'], JSON.stringify(bad))
      assert.match(answer.body.message!, /1 to 255 visible ASCII/)
    }
    // Bytes fetch would refuse to send: a raw request. Latin-1 and UTF-8 bytes above 0x7E, a repeated header.
    const host = new URL(server.origin).host
    const raw = (headerLines: string): Buffer =>
      Buffer.concat([
        Buffer.from(`POST /v2/store/orders HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n`),
        Buffer.from(headerLines, 'latin1'),
        Buffer.from(`Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`),
      ])
    for (const lines of ['Idempotency-Key: caf\u00e9\r\n', 'Idempotency-Key: caf\u00c3\u00a9\r\n', 'Idempotency-Key: a\r\nIdempotency-Key: b\r\n']) {
      const answer = parseRawResponse(await rawRequest(server.origin, raw(lines)))
      assert.equal(answer.status, 400, lines)
      assert.equal((answer.body as { code: string }).code, 'invalid_idempotency_key', lines)
    }
    // A control character is refused by Node's HTTP parser before any route: 400 too, an Error body.
    const control = parseRawResponse(await rawRequest(server.origin, raw('Idempotency-Key: a\u0001b\r\n')))
    assert.equal(control.status, 400)
    assert.equal(await orderCount(server, key), before, 'nothing placed')
    const longest = await place(server.origin, key, body, '~'.repeat(255))
    assert.equal(longest.status, 201, '255 visible characters are a key')
    const visible = await place(server.origin, key, body, '!"#$%&\'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~')
    assert.equal(visible.status, 201, 'every visible ASCII character')
  })

  it('needs orders:write: a key with the default scopes gets 403 on placeOrder, shipOrder and completeOrder', async () => {
    const defaultKey = await server.createKey({ scopes: ['orders:read', 'orders:cancel', 'pets:read'] })
    const before = await orderCount(server, key)
    for (const [path, body] of [
      ['/store/orders', '{"petId": 1, "quantity": 1}'],
      ['/store/orders/1000/ship', undefined],
      ['/store/orders/1000/complete', undefined],
    ] as const) {
      const answer = await post(server.origin, defaultKey, path, body)
      assert.deepEqual([answer.status, answer.body.code], [403, 'insufficient_scope'], path)
      assert.match(answer.headers.get('www-authenticate') ?? '', /scope="orders:write"/)
    }
    assert.equal(await orderCount(server, key), before)
    const writeOnly = await server.createKey({ scopes: ['orders:write'] })
    // A place answers the order it made, to a key without orders:read too: it reads no other order.
    const alone = await place(server.origin, writeOnly, '{"petId": 1, "quantity": 1}')
    assert.equal(alone.status, 201, 'orders:write alone places')
    assert.deepEqual([alone.body.status, alone.body.petId, alone.headers.get('location')], ['pending', '1', `/v2/store/orders/${alone.body.id}`])
  })

  it('replays the first response for the same key and body however spelled, places nothing; another body is 422', async () => {
    const first = await place(server.origin, key, '{"petId": 31, "quantity": 4, "shipDate": "2026-12-24T18:00:00Z"}', 'order-31')
    assert.equal(first.status, 201, first.text)
    const count = await orderCount(server, key)
    for (const same of [
      '{"petId": 31, "quantity": 4, "shipDate": "2026-12-24T18:00:00Z"}',
      '{"shipDate":"2026-12-24T19:00:00+01:00","quantity":4,"petId":31}',
      '  {\n "quantity" : 4 ,\t"petId":31, "shipDate": "2026-12-24t18:00:00.000z"}  ',
    ]) {
      const again = await place(server.origin, key, same, 'order-31')
      assert.equal(again.status, 201, same)
      assert.equal(again.text, first.text, 'the first body, byte for byte')
      assert.equal(again.headers.get('location'), first.headers.get('location'))
      assert.equal(again.headers.get('idempotent-replayed'), 'true')
    }
    assert.equal(await orderCount(server, key), count, 'nothing placed by a replay')
    for (const other of ['{"petId": 31, "quantity": 5, "shipDate": "2026-12-24T18:00:00Z"}', '{"petId": 31, "quantity": 4}', '{"petId": 32, "quantity": 4, "shipDate": "2026-12-24T18:00:00Z"}']) {
      const reused = await place(server.origin, key, other, 'order-31')
      assert.deepEqual([reused.status, reused.body.code], [422, 'idempotency_key_reused'], other)
      assert.equal(reused.headers.get('idempotent-replayed'), null)
    }
    assert.equal(await orderCount(server, key), count, 'nothing placed by a reused key')
    // A key is the API key's own: another API key with the same key places its own order.
    const otherKey = await server.createKey({ scopes: ['orders:write'] })
    const theirs = await place(server.origin, otherKey, '{"petId": 31, "quantity": 4, "shipDate": "2026-12-24T18:00:00Z"}', 'order-31')
    assert.equal(theirs.status, 201)
    assert.equal(theirs.headers.get('idempotent-replayed'), null)
    assert.notEqual(theirs.body.id, first.body.id)
  })

  it('replays the first response, not the order as it stands now', async () => {
    const first = await place(server.origin, key, '{"petId": 8, "quantity": 1}', 'then-shipped')
    assert.equal((await post(server.origin, key, `/store/orders/${first.body.id}/ship`)).status, 200)
    const again = await place(server.origin, key, '{"petId": 8, "quantity": 1}', 'then-shipped')
    assert.equal(again.status, 201)
    assert.equal(again.text, first.text)
    assert.equal(again.body.status, 'pending')
  })

  it('treats an expired key record as absent: the key places a new order', async () => {
    const first = await place(server.origin, key, '{"petId": 9, "quantity": 1}', 'expiring')
    assert.equal(first.status, 201)
    const past = new Date(Date.now() - 1000)
    await sql(server, 'UPDATE idempotency_keys SET expires_at = ? WHERE key = ?', [kind === 'sqlite' ? past.toISOString() : past, 'expiring'])
    const again = await place(server.origin, key, '{"petId": 9, "quantity": 2}', 'expiring')
    assert.equal(again.status, 201, again.text)
    assert.equal(again.headers.get('idempotent-replayed'), null)
    assert.notEqual(again.body.id, first.body.id)
    const replay = await place(server.origin, key, '{"petId": 9, "quantity": 2}', 'expiring')
    assert.equal(replay.headers.get('idempotent-replayed'), 'true', 'the new record replaces the expired one')
    assert.equal(replay.text, again.text)
  })

  it('answers 409 order_ids_exhausted once the store holds 9223372036854775807, and writes nothing', async () => {
    const own = await startTestServer(kind)
    const writer = await own.createKey({ scopes: ['orders:read', 'orders:write'] })
    await own.importOrders([{ id: INT64_MAX, petId: 1n, quantity: 1 }])
    const eventsBefore = (await events(own, writer)).length
    for (const idempotencyKey of [undefined, 'last-one']) {
      const answer = await place(own.origin, writer, '{"petId": 1, "quantity": 1}', idempotencyKey)
      assert.deepEqual([answer.status, answer.body.code], [409, 'order_ids_exhausted'])
      assert.match(answer.body.message!, /9223372036854775807/)
      assert.match(answer.body.message!, /Nothing was placed/)
      assert.equal(answer.headers.get('retry-after'), null, 'a retry cannot succeed')
    }
    assert.equal(await orderCount(own, writer), 1)
    assert.equal((await events(own, writer)).length, eventsBefore)
    // The key was not stored: once an id is free again (never, in production), it would place.
    const unused = await place(own.origin, writer, '{"petId": 2, "quantity": 9}', 'last-one')
    assert.equal(unused.body.code, 'order_ids_exhausted', 'not idempotency_key_reused: nothing was kept')
  })

  it('answers OPTIONS and other methods on its paths with Allow', async () => {
    for (const path of ['/v2/store/orders', '/v2/store/orders/1000/ship', '/v2/store/orders/1000/complete']) {
      const options = await fetch(`${server.origin}${path}`, { method: 'OPTIONS' })
      assert.equal(options.status, 204, path)
      const allow = (options.headers.get('allow') ?? '').split(', ')
      assert.ok(allow.includes('POST'), `${path}: ${allow.join(', ')}`)
      const put = await fetch(`${server.origin}${path}`, { method: 'PUT', headers: bearer(key) })
      await expectError(put, 405, 'method_not_allowed')
      assert.deepEqual(put.headers.get('allow'), options.headers.get('allow'))
    }
    assert.deepEqual((await fetch(`${server.origin}/v2/store/orders`, { method: 'OPTIONS' })).headers.get('allow')!.split(', ').sort(), ['GET', 'HEAD', 'OPTIONS', 'POST'])
  })

  it('counts places by outcome in /metrics', async () => {
    await place(server.origin, key, '{"petId": 1, "quantity": 1}', 'metered')
    await place(server.origin, key, '{"petId": 1, "quantity": 1}', 'metered')
    await place(server.origin, key, '{"petId": 1, "quantity": 2}', 'metered')
    const metrics = await (await fetch(`${server.origin}/metrics`)).text()
    for (const outcome of ['placed', 'replayed', 'key_reused']) assert.match(metrics, new RegExp(`^orders_place_total\\{outcome="${outcome}"\\} [1-9]`, 'm'), outcome)
  })
})

forEachStore('IDEMPOTENCY_KEY_TTL_HOURS', (kind) => {
  it('sets how long a key replays: the record expires that many hours after the first request', async () => {
    const server = await startTestServer(kind, { env: { IDEMPOTENCY_KEY_TTL_HOURS: '2' } })
    const key = await server.createKey({ scopes: ['orders:write'] })
    const sent = Date.now()
    assert.equal((await place(server.origin, key, '{"petId": 1, "quantity": 1}', 'ttl')).status, 201)
    const answered = Date.now()
    const expiresAt = new Date((await sql(server, 'SELECT expires_at FROM idempotency_keys WHERE key = ?', ['ttl'])) as string | Date).getTime()
    // Two hours after the request was handled: between when it was sent and when it was answered
    // (a second of slack either side for clocks), however long that took.
    assert.ok(expiresAt >= sent + 2 * 3_600_000 - 1000 && expiresAt <= answered + 2 * 3_600_000 + 1000, `${expiresAt - sent} ms after the request was sent`)
  })
})
