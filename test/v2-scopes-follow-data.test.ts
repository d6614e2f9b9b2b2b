import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import type { Scope } from '../src/domain/api-keys.js'
import { bearer, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { parseExact, type WireOrder } from './support/v2.js'

const PUBLIC_URL = 'https://93.184.215.14/hooks' // an address literal: no DNS needed to judge it

/** The keys of the matrix: what each may do follows the data it would see. */
const KEYS = {
  manage: ['webhooks:manage'],
  manageRead: ['webhooks:manage', 'orders:read'],
  write: ['orders:write'],
  writeRead: ['orders:write', 'orders:read'],
  neither: ['pets:read'],
} satisfies Record<string, Scope[]>
type KeyName = keyof typeof KEYS

interface Answer {
  status: number
  text: string
  headers: Headers
}

forEachStore('scopes that follow the data', (kind) => {
  let server: TestServer
  const keys = {} as Record<KeyName, string>
  let nextOrder = 1n

  before(async () => {
    server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })
    for (const [name, scopes] of Object.entries(KEYS)) keys[name as KeyName] = await server.createKey({ scopes, name })
  })

  async function call(key: KeyName, method: string, path: string, body?: string): Promise<Answer> {
    const headers: Record<string, string> = bearer(keys[key])
    if (body !== undefined) headers['content-type'] = 'application/json'
    const response = await fetch(`${server.origin}/v2${path}`, { method, headers, body })
    return { status: response.status, text: await response.text(), headers: response.headers }
  }

  /** 403 insufficient_scope naming exactly `missing`, in the message and the challenge. */
  function assertForbidden(answer: Answer, missing: Scope[], what: string): void {
    assert.equal(answer.status, 403, `${what}: ${answer.text}`)
    const body = JSON.parse(answer.text) as { code: string; message: string; status: number }
    assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status'], what)
    assert.equal(body.code, 'insufficient_scope', what)
    for (const scope of missing) assert.ok(body.message.includes(`"${scope}"`), `${what}: ${body.message} names ${scope}`)
    const others = ['webhooks:manage', 'orders:read', 'orders:write'].filter((scope) => !missing.includes(scope as Scope))
    for (const scope of others) assert.ok(!body.message.includes(`"${scope}"`), `${what}: ${body.message} names only what is missing`)
    assert.equal(answer.headers.get('www-authenticate'), `Bearer realm="petstore", error="insufficient_scope", scope="${missing.join(' ')}"`, what)
  }

  async function endpoint(): Promise<bigint> {
    const created = await server.store.webhooks.create({ url: PUBLIC_URL, eventTypes: ['order.created'], description: null, secret: `whsec_${'A'.repeat(43)}=` }, 100)
    assert.ok(created !== 'too_many')
    return created.id
  }

  async function pendingOrder(): Promise<bigint> {
    const id = nextOrder++
    await server.importOrders([{ id, petId: 3n, quantity: 1, status: 'pending' }])
    return id
  }

  async function order(id: bigint): Promise<WireOrder & { shippedAt?: string; completedAt?: string }> {
    const answer = await call('writeRead', 'GET', `/store/orders/${id}`)
    assert.equal(answer.status, 200, answer.text)
    return parseExact(answer.text)
  }

  it('creating an endpoint needs webhooks:manage and orders:read: a key with one or neither is 403 naming what it lacks, whatever its body, and creates nothing', async () => {
    const before = await server.store.webhooks.list()
    const cases: [KeyName, Scope[]][] = [
      ['manage', ['orders:read']],
      ['writeRead', ['webhooks:manage']],
      ['write', ['webhooks:manage', 'orders:read']],
      ['neither', ['webhooks:manage', 'orders:read']],
    ]
    for (const [key, missing] of cases) {
      for (const body of [JSON.stringify({ url: PUBLIC_URL }), '{"url": 5}', '{"nope": true}', '[]', undefined]) {
        assertForbidden(await call(key, 'POST', '/webhook-endpoints', body), missing, `create by ${key} with ${body}`)
      }
    }
    assert.deepEqual(await server.store.webhooks.list(), before, 'nothing was created')
    const created = await call('manageRead', 'POST', '/webhook-endpoints', JSON.stringify({ url: PUBLIC_URL }))
    assert.equal(created.status, 201, created.text)
    assert.equal((await server.store.webhooks.list()).length, before.length + 1)
  })

  it('replaying an endpoint needs both too; a refused replay leaves its position and status', async () => {
    const id = await endpoint()
    await server.store.webhooks.update(id, { enabled: false })
    const before = await server.store.webhooks.find(id)
    const cases: [KeyName, Scope[]][] = [
      ['manage', ['orders:read']],
      ['writeRead', ['webhooks:manage']],
      ['write', ['webhooks:manage', 'orders:read']],
    ]
    for (const [key, missing] of cases) {
      for (const body of ['{"after": "0"}', '{"after": "abc"}', '{}']) {
        assertForbidden(await call(key, 'POST', `/webhook-endpoints/${id}/replay`, body), missing, `replay by ${key} with ${body}`)
      }
    }
    assertForbidden(await call('manage', 'POST', '/webhook-endpoints/9223372036854775807/replay', '{"after": "0"}'), ['orders:read'], 'the scope before the endpoint')
    assert.deepEqual(await server.store.webhooks.find(id), before, 'nothing changed')
    const replayed = await call('manageRead', 'POST', `/webhook-endpoints/${id}/replay`, '{"after": "0"}')
    assert.equal(replayed.status, 202, replayed.text)
    assert.equal((JSON.parse(replayed.text) as { status: string }).status, 'enabled')
  })

  it('a PATCH that sets url needs orders:read as well (403 before the body is validated, changing nothing); one without url needs webhooks:manage alone', async () => {
    const id = await endpoint()
    const before = await server.store.webhooks.find(id)
    for (const body of [JSON.stringify({ url: `${PUBLIC_URL}/elsewhere` }), JSON.stringify({ url: `${PUBLIC_URL}/elsewhere`, description: 'moved' }), '{"url": 5}', '{"url": null, "bogus": 1}']) {
      assertForbidden(await call('manage', 'PATCH', `/webhook-endpoints/${id}`, body), ['orders:read'], `PATCH by manage with ${body}`)
    }
    assertForbidden(await call('manage', 'PATCH', '/webhook-endpoints/9223372036854775807', JSON.stringify({ url: PUBLIC_URL })), ['orders:read'], 'the scope before the endpoint')
    for (const key of ['write', 'writeRead'] as const) {
      for (const body of [JSON.stringify({ url: PUBLIC_URL }), '{"description": "x"}']) {
        assertForbidden(await call(key, 'PATCH', `/webhook-endpoints/${id}`, body), ['webhooks:manage'], `PATCH by ${key} with ${body}`)
      }
    }
    assert.deepEqual(await server.store.webhooks.find(id), before, 'nothing changed')

    const described = await call('manage', 'PATCH', `/webhook-endpoints/${id}`, '{"description": "only words", "enabled": false}')
    assert.equal(described.status, 200, described.text)
    assert.deepEqual(JSON.parse(described.text.replace(/"id":([0-9]+)/, '"id":"$1"')), {
      id: String(id),
      url: PUBLIC_URL,
      eventTypes: ['order.created'],
      description: 'only words',
      status: 'disabled',
      disabledReason: 'disabled_by_request',
      position: before!.position.toString(),
      createdAt: before!.createdAt,
    })
    const invalid = await call('manage', 'PATCH', `/webhook-endpoints/${id}`, '{"description": 5}')
    assert.equal(invalid.status, 400, 'without url, a bad body is the 400 of any key that may send it')
    const moved = await call('manageRead', 'PATCH', `/webhook-endpoints/${id}`, JSON.stringify({ url: `${PUBLIC_URL}/moved` }))
    assert.equal(moved.status, 200, moved.text)
    assert.equal((await server.store.webhooks.find(id))!.url, `${PUBLIC_URL}/moved`)
  })

  it('ship and complete: a key without orders:read gets 204 with no body, first time and on a retry; the order is written all the same', async () => {
    const id = await pendingOrder()
    for (const path of [`/store/orders/${id}/ship`, `/store/orders/${id}/ship`, `/store/orders/${id}/complete`, `/store/orders/${id}/complete`]) {
      const answer = await call('write', 'POST', path)
      assert.equal(answer.status, 204, `${path}: ${answer.text}`)
      assert.equal(answer.text, '', `${path}: no body`)
      assert.equal(answer.headers.get('content-type'), null, path)
    }
    const done = await order(id)
    assert.deepEqual([done.status, done.complete], ['shipped', true])
    assert.ok(done.shippedAt !== undefined && done.completedAt !== undefined)
    // A retry with orders:read shows the order as it stands; the key without it never does.
    const shown = await call('writeRead', 'POST', `/store/orders/${id}/ship`)
    assert.equal(shown.status, 200)
    assert.deepEqual(parseExact(shown.text), done)
    const again = await call('write', 'POST', `/store/orders/${id}/complete`, '{}')
    assert.deepEqual([again.status, again.text], [204, ''])
  })

  it('ship and complete: a key with orders:read gets the order, first time and on a retry, byte for byte the same', async () => {
    const id = await pendingOrder()
    const shipped = await call('writeRead', 'POST', `/store/orders/${id}/ship`)
    assert.equal(shipped.status, 200, shipped.text)
    assert.equal(parseExact<WireOrder>(shipped.text).status, 'shipped')
    const shippedAgain = await call('writeRead', 'POST', `/store/orders/${id}/ship`)
    assert.deepEqual([shippedAgain.status, shippedAgain.text], [200, shipped.text])
    const completed = await call('writeRead', 'POST', `/store/orders/${id}/complete`)
    assert.equal(completed.status, 200, completed.text)
    assert.equal(parseExact<WireOrder>(completed.text).complete, true)
    const completedAgain = await call('writeRead', 'POST', `/store/orders/${id}/complete`)
    assert.deepEqual([completedAgain.status, completedAgain.text], [200, completed.text])
    assert.deepEqual(parseExact(completed.text), await order(id))
  })

  it('ship and complete: errors are as for any key, and a key without orders:write is 403 whatever it sends, changing nothing', async () => {
    const cancelled = nextOrder++
    await server.importOrders([{ id: cancelled, status: 'cancelled' }])
    const pending = await pendingOrder()
    const errors: [string, number, string][] = [
      [`/store/orders/${cancelled}/ship`, 409, 'order_cancelled'],
      [`/store/orders/${cancelled}/complete`, 409, 'order_cancelled'],
      [`/store/orders/${pending}/complete`, 409, 'order_not_shipped'],
      ['/store/orders/987654321/ship', 404, 'order_not_found'],
      ['/store/orders/987654321/complete', 404, 'order_not_found'],
    ]
    for (const key of ['write', 'writeRead'] as const) {
      for (const [path, status, code] of errors) {
        const answer = await call(key, 'POST', path)
        assert.equal(answer.status, status, `${key} ${path}: ${answer.text}`)
        assert.equal((JSON.parse(answer.text) as { code: string }).code, code)
      }
    }
    for (const key of ['manage', 'manageRead'] as const) {
      for (const [action, body] of [['ship', undefined], ['complete', undefined], ['ship', '{"status": "shipped"}'], ['complete', '[]']] as const) {
        assertForbidden(await call(key, 'POST', `/store/orders/${pending}/${action}`, body), ['orders:write'], `${action} by ${key}`)
      }
    }
    const unchanged = await order(pending)
    assert.deepEqual([unchanged.status, unchanged.shippedAt], ['pending', undefined], 'nothing changed')
  })
})
