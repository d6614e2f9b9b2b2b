import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import pino from 'pino'
import { EventPruner } from '../src/pruning/event-pruner.js'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { sql } from './support/v2.js'

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/
const ALL_TYPES = ['order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled']
const PUBLIC_URL = 'https://93.184.215.14/hooks' // an address literal: no DNS needed to judge it

interface WireEndpoint {
  id: string
  url: string
  eventTypes: string[]
  description?: string
  status: string
  disabledReason?: string
  position: string
  failingSince?: string
  nextAttemptAt?: string
  createdAt: string
  secret?: string
}

/** A response's JSON with `id` kept exact (a decimal string). */
function parseEndpoint<T = WireEndpoint>(text: string): T {
  return JSON.parse(text.replace(/"id":(-?[0-9]+)/g, '"id":"$1"')) as T
}

async function call(server: TestServer, key: string, method: string, path: string, body?: string): Promise<{ status: number; text: string; headers: Headers }> {
  const headers: Record<string, string> = bearer(key)
  if (body !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(`${server.origin}/v2/webhook-endpoints${path}`, { method, headers, body })
  return { status: response.status, text: await response.text(), headers: response.headers }
}

async function create(server: TestServer, key: string, body: object): Promise<WireEndpoint> {
  const response = await call(server, key, 'POST', '', JSON.stringify(body))
  assert.equal(response.status, 201, response.text)
  return parseEndpoint(response.text)
}

async function latestEventId(server: TestServer, key: string): Promise<string> {
  const response = await fetch(`${server.origin}/v2/store/order-events?limit=1000`, { headers: bearer(key) })
  return ((await response.json()) as { nextCursor: string }).nextCursor
}

/** The endpoint as get and list show it: the creation's answer without its secret. */
function withoutSecret<T extends { secret?: string }>(created: T): Omit<T, 'secret'> {
  const shown: Partial<T> = { ...created }
  delete shown.secret
  return shown as Omit<T, 'secret'>
}

forEachStore('v2 webhook endpoints', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_MAX_ENDPOINTS: '5' } })
    key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    await server.importOrders([{ id: 1n, petId: 1n, quantity: 1 }, { id: 2n, petId: 1n, quantity: 1 }])
  })

  async function removeAll(): Promise<void> {
    for (const endpoint of await server.store.webhooks.list()) await server.store.webhooks.remove(endpoint.id)
  }

  it('creates an endpoint at the head of the feed, every type by default, and shows its secret only then', async () => {
    await removeAll()
    const head = await latestEventId(server, key)
    const response = await call(server, key, 'POST', '', JSON.stringify({ url: PUBLIC_URL }))
    assert.equal(response.status, 201, response.text)
    const created = parseEndpoint(response.text)
    assert.match(created.secret!, SECRET)
    assert.equal(response.headers.get('location'), `/v2/webhook-endpoints/${created.id}`)
    assert.deepEqual(Object.keys(created).sort(), ['createdAt', 'eventTypes', 'id', 'position', 'secret', 'status', 'url'])
    assert.equal(created.url, PUBLIC_URL)
    assert.deepEqual(created.eventTypes, ALL_TYPES)
    assert.equal(created.status, 'enabled')
    assert.equal(created.position, head)
    assert.ok(Math.abs(Date.parse(created.createdAt) - Date.now()) < 60_000, created.createdAt)
    assert.match(response.text, /^\{"id":[0-9]+,/, 'the id is a JSON integer')

    const shown = await call(server, key, 'GET', `/${created.id}`)
    assert.equal(shown.status, 200, shown.text)
    const shownAtCreation = withoutSecret(created)
    assert.deepEqual(parseEndpoint(shown.text), shownAtCreation)
    const listed = await call(server, key, 'GET', '')
    for (const text of [shown.text, listed.text]) {
      assert.doesNotMatch(text, /whsec_|secret/)
      assert.equal(text.includes(created.secret!.slice(6)), false)
    }
  })

  it('keeps event types once each, in feed order, and a description; lists ascending id', async () => {
    await removeAll()
    const first = await create(server, key, { url: PUBLIC_URL, eventTypes: ['order.cancelled', 'order.shipped'], description: 'Warehouse dispatch' })
    assert.deepEqual(first.eventTypes, ['order.shipped', 'order.cancelled'])
    assert.equal(first.description, 'Warehouse dispatch')
    const second = await create(server, key, { url: `${PUBLIC_URL}/2`, description: '' })
    assert.equal(second.description, undefined, 'an empty description is none')
    const listed = await call(server, key, 'GET', '')
    assert.equal(listed.status, 200, listed.text)
    const { data } = parseEndpoint<{ data: WireEndpoint[] }>(listed.text)
    assert.deepEqual(data.map((endpoint) => endpoint.id), [first.id, second.id])
    assert.ok(BigInt(first.id) < BigInt(second.id))
  })

  it('updates the fields given: an empty patch changes nothing; enabled false disables by request, true resumes at its position', async () => {
    await removeAll()
    const created = await create(server, key, { url: PUBLIC_URL, description: 'before' })
    const endpoint = withoutSecret(created)

    const unchanged = await call(server, key, 'PATCH', `/${created.id}`, '{}')
    assert.equal(unchanged.status, 200, unchanged.text)
    assert.deepEqual(parseEndpoint(unchanged.text), endpoint)
    const noBody = await call(server, key, 'PATCH', `/${created.id}`)
    assert.equal(noBody.status, 200, noBody.text)

    const changed = await call(server, key, 'PATCH', `/${created.id}`, JSON.stringify({ url: `${PUBLIC_URL}/new`, eventTypes: ['order.shipped'], description: '' }))
    assert.equal(changed.status, 200, changed.text)
    const { description: _description, ...withoutDescription } = endpoint
    assert.equal(_description, 'before')
    assert.deepEqual(parseEndpoint(changed.text), { ...withoutDescription, url: `${PUBLIC_URL}/new`, eventTypes: ['order.shipped'] })

    const disabled = parseEndpoint((await call(server, key, 'PATCH', `/${created.id}`, '{"enabled": false}')).text)
    assert.equal(disabled.status, 'disabled')
    assert.equal(disabled.disabledReason, 'disabled_by_request')
    await server.importOrders([{ id: 3n, petId: 1n, quantity: 1 }])
    const enabled = parseEndpoint((await call(server, key, 'PATCH', `/${created.id}`, '{"enabled": true}')).text)
    assert.equal(enabled.status, 'enabled')
    assert.equal(enabled.disabledReason, undefined)
    assert.equal(enabled.position, created.position, 'it resumes where it stopped, the event meanwhile still ahead')
    assert.doesNotMatch(changed.text + JSON.stringify(enabled), /whsec_/)
  })

  it('deletes an endpoint (204), which is then unknown (404)', async () => {
    const created = await create(server, key, { url: PUBLIC_URL })
    const deleted = await call(server, key, 'DELETE', `/${created.id}`)
    assert.equal(deleted.status, 204)
    assert.equal(deleted.text, '')
    await expectError(await fetch(`${server.origin}/v2/webhook-endpoints/${created.id}`, { headers: bearer(key) }), 404, 'webhook_endpoint_not_found')
    await expectError(await fetch(`${server.origin}/v2/webhook-endpoints/${created.id}`, { method: 'DELETE', headers: bearer(key) }), 404, 'webhook_endpoint_not_found')
  })

  it('rotates the secret: a new one, shown once, stored for signing', async () => {
    await removeAll()
    const created = await create(server, key, { url: PUBLIC_URL })
    const rotated = await call(server, key, 'POST', `/${created.id}/rotate-secret`)
    assert.equal(rotated.status, 200, rotated.text)
    const { secret } = JSON.parse(rotated.text) as { secret: string }
    assert.deepEqual(Object.keys(JSON.parse(rotated.text) as object), ['secret'])
    assert.match(secret, SECRET)
    assert.notEqual(secret, created.secret)
    assert.doesNotMatch((await call(server, key, 'GET', `/${created.id}`)).text, /whsec_/)
    // What the dispatcher signs with: the new secret, and the old one for a day.
    await server.importOrders([{ id: 4n, petId: 1n, quantity: 1 }])
    const leases = await server.store.webhooks.lease('test', new Date(), 30_000, 10)
    const lease = leases.find((leased) => leased.endpoint.id === BigInt(created.id))
    assert.ok(lease !== undefined, 'the endpoint, behind the head, is leased')
    assert.equal(lease.secrets.current, secret)
    assert.equal(lease.secrets.previous, created.secret)
    const until = Date.parse(lease.secrets.previousUntil!) - Date.now()
    assert.ok(until > 23 * 3_600_000 && until <= 24 * 3_600_000, lease.secrets.previousUntil!)
    await server.store.webhooks.release(lease)
    const body = await call(server, key, 'POST', `/${created.id}/rotate-secret`, '{"secret": "whsec_mine"}')
    assert.equal(body.status, 400, body.text)
    assert.equal((JSON.parse(body.text) as { code: string }).code, 'invalid_body')
  })

  it('replays from a cursor (202, enabled at that position); refuses a malformed cursor, one past the end (400) and one behind retention (410)', async () => {
    await removeAll()
    const created = await create(server, key, { url: PUBLIC_URL })
    await call(server, key, 'PATCH', `/${created.id}`, '{"enabled": false}')
    const replayed = await call(server, key, 'POST', `/${created.id}/replay`, '{"after": "1"}')
    assert.equal(replayed.status, 202, replayed.text)
    const endpoint = parseEndpoint(replayed.text)
    assert.equal(endpoint.position, '1')
    assert.equal(endpoint.status, 'enabled')
    assert.equal(endpoint.disabledReason, undefined)

    for (const after of ['abc', '-1', '01', '9223372036854775808']) {
      const response = await call(server, key, 'POST', `/${created.id}/replay`, JSON.stringify({ after }))
      assert.equal(response.status, 400, `${after}: ${response.text}`)
      assert.equal((JSON.parse(response.text) as { code: string }).code, 'invalid_cursor', after)
    }
    const head = BigInt(await latestEventId(server, key))
    const past = await call(server, key, 'POST', `/${created.id}/replay`, JSON.stringify({ after: String(head + 1000n) }))
    assert.equal(past.status, 400, past.text)
    assert.equal((JSON.parse(past.text) as { code: string }).code, 'invalid_cursor')
    for (const body of ['{}', '{"after": 1}', '{"after": "1", "from": "2"}']) {
      const response = await call(server, key, 'POST', `/${created.id}/replay`, body)
      assert.equal(response.status, 400, `${body}: ${response.text}`)
      assert.equal((JSON.parse(response.text) as { code: string }).code, 'invalid_body', body)
    }
    assert.equal(parseEndpoint((await call(server, key, 'GET', `/${created.id}`)).text).position, '1', 'a refused replay changes nothing')
  })

  it('lists attempts newest first, at most limit (default 20)', async () => {
    await removeAll()
    const created = await create(server, key, { url: PUBLIC_URL })
    const empty = await call(server, key, 'GET', `/${created.id}/attempts`)
    assert.equal(empty.status, 200, empty.text)
    assert.deepEqual(JSON.parse(empty.text), { data: [] })
    // Attempts recorded as the dispatcher records them: three failures of one event.
    await server.importOrders([{ id: 5n, petId: 1n, quantity: 1 }])
    const eventId = BigInt(await latestEventId(server, key))
    for (let i = 0; i < 25; i++) {
      const [lease] = (await server.store.webhooks.lease('test', new Date(), 30_000, 10)).filter((leased) => leased.endpoint.id === BigInt(created.id))
      assert.ok(lease !== undefined, `attempt ${i}: leased`)
      const attempt = { eventId, attemptedAt: new Date(Date.now() + i * 1000).toISOString(), status: 500 + (i % 4), error: i === 0 ? 'timeout' : null, durationMs: i }
      assert.equal(await server.store.webhooks.fail(lease, attempt, { retryAt: new Date(0) }), true)
    }
    const attempts = JSON.parse((await call(server, key, 'GET', `/${created.id}/attempts`)).text) as { data: { durationMs: number; eventId: string; status?: number; error?: string }[] }
    assert.equal(attempts.data.length, 20)
    assert.deepEqual(attempts.data.map((attempt) => attempt.durationMs), Array.from({ length: 20 }, (_, i) => 24 - i), 'newest first')
    assert.equal(attempts.data[0]!.eventId, String(eventId))
    assert.equal(attempts.data[0]!.status, 500 + (24 % 4))
    assert.equal(attempts.data[0]!.error, undefined)
    const three = JSON.parse((await call(server, key, 'GET', `/${created.id}/attempts?limit=3`)).text) as { data: unknown[] }
    assert.equal(three.data.length, 3)
    const all = JSON.parse((await call(server, key, 'GET', `/${created.id}/attempts?limit=100`)).text) as { data: { error?: string }[] }
    assert.equal(all.data.length, 25)
    assert.equal(all.data[24]!.error, 'timeout')
    const endpoint = parseEndpoint((await call(server, key, 'GET', `/${created.id}`)).text)
    assert.ok(endpoint.failingSince !== undefined && endpoint.nextAttemptAt !== undefined, 'a failing endpoint says since when and when next')
    for (const query of ['limit=0', 'limit=101', 'limit=x', 'limit=1&limit=2', 'after=1']) {
      await expectError(await fetch(`${server.origin}/v2/webhook-endpoints/${created.id}/attempts?${query}`, { headers: bearer(key) }), 400, 'invalid_parameter')
    }
  })

  it('is 404 webhook_endpoint_not_found for an unknown id, and 400 invalid_endpoint_id for one that is not an int64', async () => {
    const operations: [string, string, string?][] = [
      ['GET', ''],
      ['PATCH', '', '{}'],
      ['DELETE', ''],
      ['POST', '/rotate-secret'],
      ['POST', '/replay', '{"after": "1"}'],
      ['GET', '/attempts'],
      ['POST', '/ping'],
    ]
    for (const [method, suffix, body] of operations) {
      for (const id of ['9223372036854775807', '0']) {
        const response = await call(server, key, method, `/${id}${suffix}`, body)
        assert.equal(response.status, 404, `${method} ${id}${suffix}: ${response.text}`)
        assert.equal((JSON.parse(response.text) as { code: string }).code, 'webhook_endpoint_not_found')
      }
      for (const id of ['abc', '9223372036854775808', '1.5']) {
        const response = await call(server, key, method, `/${id}${suffix}`, body)
        assert.equal(response.status, 400, `${method} ${id}${suffix}: ${response.text}`)
        assert.equal((JSON.parse(response.text) as { code: string }).code, 'invalid_endpoint_id')
      }
    }
  })

  it('refuses bodies that are not exactly what an operation takes (400 invalid_body), changing nothing', async () => {
    await removeAll()
    const bodies = [
      '{}',
      '[]',
      'null',
      '{"url": 5}',
      `{"url": ""}`,
      `{"url": "${PUBLIC_URL}", "eventTypes": []}`,
      `{"url": "${PUBLIC_URL}", "eventTypes": ["order.shipped", "order.shipped"]}`,
      `{"url": "${PUBLIC_URL}", "eventTypes": ["order.lost"]}`,
      `{"url": "${PUBLIC_URL}", "eventTypes": "order.shipped"}`,
      `{"url": "${PUBLIC_URL}", "description": "${'x'.repeat(257)}"}`,
      `{"url": "${PUBLIC_URL}", "description": null}`,
      `{"url": "${PUBLIC_URL}", "secret": "whsec_AAAA"}`,
      `{"url": "${PUBLIC_URL}", "enabled": false}`,
      `{"url": "${PUBLIC_URL}", "url": "${PUBLIC_URL}/other"}`,
    ]
    for (const body of bodies) {
      const response = await call(server, key, 'POST', '', body)
      assert.equal(response.status, 400, `${body}: ${response.text}`)
      assert.equal((JSON.parse(response.text) as { code: string }).code, 'invalid_body', body)
      assert.doesNotMatch(response.text, /whsec_AAAA/)
    }
    const tooLong = await call(server, key, 'POST', '', JSON.stringify({ url: `${PUBLIC_URL}?${'a'.repeat(2100)}` }))
    assert.equal(tooLong.status, 400, tooLong.text)
    const exact = await create(server, key, { url: PUBLIC_URL, description: 'x'.repeat(256) })
    for (const body of ['{"enabled": "yes"}', '{"eventTypes": []}', '{"position": "1"}', '{"status": "enabled"}']) {
      const response = await call(server, key, 'PATCH', `/${exact.id}`, body)
      assert.equal(response.status, 400, `${body}: ${response.text}`)
      assert.equal((JSON.parse(response.text) as { code: string }).code, 'invalid_body', body)
    }
    const text = await fetch(`${server.origin}/v2/webhook-endpoints`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'text/plain' }, body: 'x' })
    await expectError(text, 415, 'unsupported_media_type')
    assert.equal((await server.store.webhooks.list()).length, 1, 'only the valid one was created')
    const query = await fetch(`${server.origin}/v2/webhook-endpoints?limit=1`, { headers: bearer(key) })
    await expectError(query, 400, 'invalid_parameter')
  })

  it('stores a URL as the URL parser writes it, which is what a delivery calls, at creation and PATCH', async () => {
    await removeAll()
    const created = await create(server, key, { url: 'HTTPS://９３.184.215.14/a/../hooks' })
    assert.equal(created.url, PUBLIC_URL)
    assert.equal(parseEndpoint((await call(server, key, 'GET', `/${created.id}`)).text).url, PUBLIC_URL)
    const patched = await call(server, key, 'PATCH', `/${created.id}`, JSON.stringify({ url: 'https://93.184.215.14:443/hooks/./new' }))
    assert.equal(parseEndpoint(patched.text).url, 'https://93.184.215.14/hooks/new')
    // Neither a fragment nor an empty query's `?` is sent: neither is kept.
    const trimmed = await call(server, key, 'PATCH', `/${created.id}`, JSON.stringify({ url: 'https://93.184.215.14/hooks?#top' }))
    assert.equal(parseEndpoint(trimmed.text).url, PUBLIC_URL)
    const query = await call(server, key, 'PATCH', `/${created.id}`, JSON.stringify({ url: 'https://93.184.215.14/hooks?q=ä#top' }))
    assert.equal(parseEndpoint(query.text).url, `${PUBLIC_URL}?q=%C3%A4`)
    // 1,000 characters sent, 6,000 once percent-encoded: the URL shown could not be sent back.
    const long = await call(server, key, 'PATCH', `/${created.id}`, JSON.stringify({ url: `https://93.184.215.14/${'é'.repeat(1000)}` }))
    assert.equal(long.status, 400, long.text)
    assert.match(long.text, /"code":"invalid_webhook_url".*at most 2048 characters as it is called \(percent-encoded\): it is 6022/)
    assert.equal(parseEndpoint((await call(server, key, 'GET', `/${created.id}`)).text).url, `${PUBLIC_URL}?q=%C3%A4`, 'nothing changed')
  })

  it('refuses URLs that are not https or reach a private network (400 invalid_webhook_url, saying why), creating nothing', async () => {
    await removeAll()
    const refused: [string, RegExp][] = [
      ['http://93.184.215.14/hooks', /https/],
      ['not a url', /URL/],
      ['/relative/path', /URL/],
      ['ftp://93.184.215.14/', /https/],
      ['https://user:pass@93.184.215.14/', /user name or password/],
      ['https://127.0.0.1/hooks', /private or reserved/],
      ['https://[::1]/hooks', /private or reserved/],
      ['https://10.1.2.3/', /private or reserved/],
      ['https://192.168.0.10/', /private or reserved/],
      ['https://172.16.0.1/', /private or reserved/],
      ['https://169.254.169.254/latest/meta-data', /private or reserved/],
      ['https://[fe80::1]/', /private or reserved/],
      ['https://[fd12:3456::1]/', /private or reserved/],
      ['https://[::ffff:127.0.0.1]/', /private or reserved/],
      ['https://0.0.0.0/', /private or reserved/],
      ['https://localhost/hooks', /does not resolve to a public address/],
    ]
    for (const [url, problem] of refused) {
      const response = await call(server, key, 'POST', '', JSON.stringify({ url }))
      assert.equal(response.status, 400, `${url}: ${response.text}`)
      const body = JSON.parse(response.text) as { code: string; message: string }
      assert.equal(body.code, 'invalid_webhook_url', url)
      assert.match(body.message, problem, url)
      assert.doesNotMatch(body.message, /user:pass/, 'the credentials are not echoed')
    }
    assert.deepEqual(await server.store.webhooks.list(), [], 'nothing was created')

    const created = await create(server, key, { url: PUBLIC_URL })
    const patched = await call(server, key, 'PATCH', `/${created.id}`, JSON.stringify({ url: 'https://127.0.0.1/', description: 'changed' }))
    assert.equal(patched.status, 400, patched.text)
    assert.equal((JSON.parse(patched.text) as { code: string }).code, 'invalid_webhook_url')
    const after = parseEndpoint((await call(server, key, 'GET', `/${created.id}`)).text)
    assert.equal(after.url, PUBLIC_URL)
    assert.equal(after.description, undefined, 'a refused patch changes nothing')
  })

  it('caps the endpoints at WEBHOOK_MAX_ENDPOINTS (409 webhook_endpoint_limit); deleting one makes room', async () => {
    await removeAll()
    const made: WireEndpoint[] = []
    for (let i = 0; i < 5; i++) made.push(await create(server, key, { url: `${PUBLIC_URL}/${i}` }))
    const over = await call(server, key, 'POST', '', JSON.stringify({ url: PUBLIC_URL }))
    assert.equal(over.status, 409, over.text)
    assert.equal((JSON.parse(over.text) as { code: string }).code, 'webhook_endpoint_limit')
    assert.equal((await server.store.webhooks.list()).length, 5)
    assert.equal((await call(server, key, 'DELETE', `/${made[0]!.id}`)).status, 204)
    await create(server, key, { url: PUBLIC_URL })
  })

  it('needs the webhooks:manage scope for every operation (403), and a key (401)', async () => {
    const created = await create(server, key, { url: PUBLIC_URL }).catch(async () => {
      await removeAll()
      return create(server, key, { url: PUBLIC_URL })
    })
    const reader = await server.createKey({ scopes: ['orders:read', 'orders:cancel', 'orders:write', 'pets:read'] })
    const operations: [string, string, string?][] = [
      ['POST', '', JSON.stringify({ url: PUBLIC_URL })],
      ['GET', ''],
      ['GET', `/${created.id}`],
      ['PATCH', `/${created.id}`, '{"enabled": false}'],
      ['DELETE', `/${created.id}`],
      ['POST', `/${created.id}/rotate-secret`],
      ['POST', `/${created.id}/replay`, '{"after": "1"}'],
      ['GET', `/${created.id}/attempts`],
      ['POST', `/${created.id}/ping`],
    ]
    for (const [method, path, body] of operations) {
      const forbidden = await call(server, reader, method, path, body)
      assert.equal(forbidden.status, 403, `${method} ${path}: ${forbidden.text}`)
      assert.equal((JSON.parse(forbidden.text) as { code: string }).code, 'insufficient_scope')
      assert.match(forbidden.headers.get('www-authenticate') ?? '', /scope="webhooks:manage"/)
      const anonymous = await fetch(`${server.origin}/v2/webhook-endpoints${path}`, { method, body, headers: body === undefined ? {} : { 'content-type': 'application/json' } })
      await expectError(anonymous, 401, 'unauthorized')
    }
    const still = parseEndpoint((await call(server, key, 'GET', `/${created.id}`)).text)
    assert.equal(still.status, 'enabled', 'nothing was done without the scope')
  })

  it('refuses a PATCH from a key without webhooks:manage before its body, then names orders:read for a PATCH of url', async () => {
    await removeAll()
    const created = await create(server, key, { url: PUBLIC_URL })
    const body = JSON.stringify({ url: `${PUBLIC_URL}/other` })
    const writer = await server.createKey({ scopes: ['orders:write'] })
    const first = await call(server, writer, 'PATCH', `/${created.id}`, body)
    assert.equal(first.status, 403, first.text)
    assert.match(first.headers.get('www-authenticate') ?? '', /scope="webhooks:manage"$/)
    const manager = await server.createKey({ scopes: ['webhooks:manage'] })
    const second = await call(server, manager, 'PATCH', `/${created.id}`, body)
    assert.equal(second.status, 403, second.text)
    assert.match(second.headers.get('www-authenticate') ?? '', /scope="orders:read"$/)
    assert.equal(parseEndpoint((await call(server, key, 'GET', `/${created.id}`)).text).url, PUBLIC_URL, 'nothing changed')
  })

  it('leaves an enabled endpoint waiting for a retry as it is on {"enabled": true}; disabling and enabling clears the retry', async () => {
    await removeAll()
    const created = await create(server, key, { url: PUBLIC_URL })
    await server.importOrders([{ id: 71n, petId: 1n, quantity: 1 }])
    const [lease] = (await server.store.webhooks.lease('test', new Date(), 30_000, 10)).filter((leased) => leased.endpoint.id === BigInt(created.id))
    assert.ok(lease !== undefined)
    const retryAt = new Date(Date.now() + 86_400_000)
    const attempt = { eventId: 1n, attemptedAt: new Date().toISOString(), status: 503, error: 'status 503', durationMs: 5 }
    assert.equal(await server.store.webhooks.fail(lease, attempt, { retryAt }), true)
    const waiting = parseEndpoint((await call(server, key, 'GET', `/${created.id}`)).text)
    assert.equal(waiting.nextAttemptAt, retryAt.toISOString())
    const same = parseEndpoint((await call(server, key, 'PATCH', `/${created.id}`, '{"enabled": true}')).text)
    assert.deepEqual(same, waiting)
    await call(server, key, 'PATCH', `/${created.id}`, '{"enabled": false}')
    const resumed = parseEndpoint((await call(server, key, 'PATCH', `/${created.id}`, '{"enabled": true}')).text)
    assert.equal(resumed.status, 'enabled')
    assert.equal(resumed.nextAttemptAt, undefined, 'the retry is cleared: sent at once')
  })

  it('answers OPTIONS with Allow, and another method with 405', async () => {
    const paths: [string, string][] = [
      ['/v2/webhook-endpoints', 'GET, POST, HEAD, OPTIONS'],
      ['/v2/webhook-endpoints/1', 'GET, PATCH, DELETE, HEAD, OPTIONS'],
      ['/v2/webhook-endpoints/1/rotate-secret', 'POST, OPTIONS'],
      ['/v2/webhook-endpoints/1/replay', 'POST, OPTIONS'],
      ['/v2/webhook-endpoints/1/attempts', 'GET, HEAD, OPTIONS'],
      ['/v2/webhook-endpoints/1/ping', 'POST, OPTIONS'],
    ]
    for (const [path, allow] of paths) {
      const options = await fetch(`${server.origin}${path}`, { method: 'OPTIONS' })
      assert.equal(options.status, 204, path)
      assert.deepEqual(options.headers.get('allow')!.split(', ').sort(), allow.split(', ').sort(), path)
      const put = await fetch(`${server.origin}${path}`, { method: 'PUT', headers: bearer(key) })
      await expectError(put, 405, 'method_not_allowed')
    }
  })
})

describe('v2 webhook endpoints: retention, private networks and logs', () => {
  it('refuses a replay behind retention with 410 events_expired', async () => {
    const server = await startTestServer('sqlite')
    const key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    await server.importOrders(Array.from({ length: 5 }, (_, i) => ({ id: BigInt(i + 1), petId: 1n, quantity: 1 })))
    const created = await create(server, key, { url: PUBLIC_URL })
    await sql(server, 'UPDATE order_events SET occurred_at = ? WHERE position <= ?', ['2020-01-01T00:00:00.000Z', 3])
    const log = { info: () => {}, warn: (fields: object) => assert.fail(`prune failed: ${JSON.stringify(fields)}`) }
    assert.equal(await new EventPruner(server.store.events, { retentionDays: 30, batch: 10, log }).prune(), 3)
    const expired = await call(server, key, 'POST', `/${created.id}/replay`, '{"after": "1"}')
    assert.equal(expired.status, 410, expired.text)
    assert.equal((JSON.parse(expired.text) as { code: string }).code, 'events_expired')
    const kept = await call(server, key, 'POST', `/${created.id}/replay`, '{"after": "3"}')
    assert.equal(kept.status, 202, kept.text)
  })

  it('allows http and private addresses with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true, still not credentials or other schemes', async () => {
    const server = await startTestServer('sqlite', { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } })
    const key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    for (const url of ['http://127.0.0.1:9/hooks', 'https://10.1.2.3/', 'http://[::1]:8080/', 'http://localhost:3000/hooks']) {
      assert.equal((await create(server, key, { url })).url, url)
    }
    for (const url of ['ftp://127.0.0.1/', 'http://user:pass@127.0.0.1/', 'not a url']) {
      await expectError(await fetch(`${server.origin}/v2/webhook-endpoints`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json' }, body: JSON.stringify({ url }) }), 400, 'invalid_webhook_url')
    }
  })

  it('never logs a secret: not at creation, rotation, or a refused body', async () => {
    const lines: string[] = []
    const logger = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) })
    const server = await startTestServer('sqlite', { logger })
    const key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    const created = await create(server, key, { url: PUBLIC_URL })
    const rotated = JSON.parse((await call(server, key, 'POST', `/${created.id}/rotate-secret`)).text) as { secret: string }
    await call(server, key, 'POST', '', JSON.stringify({ url: PUBLIC_URL, secret: 'whsec_mine' }))
    await call(server, key, 'POST', `/${created.id}/rotate-secret`, JSON.stringify({ secret: 'whsec_mine' }))
    assert.ok(lines.length >= 4, 'requests were logged')
    for (const line of lines) {
      assert.doesNotMatch(line, /whsec_/, line)
      for (const secret of [created.secret!, rotated.secret]) assert.equal(line.includes(secret.slice(6, 30)), false, line)
    }
  })
})

describe('v2 webhook endpoints: the examples of the document', () => {
  it('are accepted as they are: create, update and replay', async () => {
    // Private networks allowed: the example's host is judged without DNS, which a test host may lack.
    const server = await startTestServer('sqlite', { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } })
    const key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    await server.importOrders(Array.from({ length: 3 }, (_, i) => ({ id: BigInt(i + 1), petId: 1n, quantity: 1 })))
    type Op = { requestBody: { content: { 'application/json': { example?: unknown } } } }
    const doc = (await (await fetch(`${server.origin}/v2/openapi.json`)).json()) as { paths: Record<string, Record<string, Op>> }
    const example = (path: string, method: string): string => {
      const body = doc.paths[path]![method]!.requestBody.content['application/json'].example
      assert.ok(body !== undefined, `${method} ${path} has an example`)
      return JSON.stringify(body)
    }
    const created = await call(server, key, 'POST', '', example('/webhook-endpoints', 'post'))
    assert.equal(created.status, 201, created.text)
    const { id } = parseEndpoint(created.text)
    const updated = await call(server, key, 'PATCH', `/${id}`, example('/webhook-endpoints/{endpointId}', 'patch'))
    assert.equal(updated.status, 200, updated.text)
    const replayed = await call(server, key, 'POST', `/${id}/replay`, example('/webhook-endpoints/{endpointId}/replay', 'post'))
    assert.equal(replayed.status, 202, replayed.text)
  })
})
