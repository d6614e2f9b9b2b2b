import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import pino from 'pino'
import { Webhook } from 'standardwebhooks'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { receiver, type Receiver } from './support/webhook-receiver.js'

const PING_ID = /^ping_[0-9a-f]{24}$/

interface PingAnswer {
  status: number
  text: string
  /** The 200's body. */
  result: { status?: number; error?: string; durationMs: number }
}

forEachStore('v2 pingWebhookEndpoint', (kind) => {
  let server: TestServer
  let admin: string
  let manage: string

  before(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } })
    admin = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    manage = await server.createKey({ scopes: ['webhooks:manage'] })
  })

  /** A new endpoint at `url`, through the API: its id (exact, as a string) and secret. */
  async function create(url: string): Promise<{ id: string; secret: string }> {
    const response = await fetch(`${server.origin}/v2/webhook-endpoints`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url }),
    })
    const text = await response.text()
    assert.equal(response.status, 201, text)
    return JSON.parse(text.replace(/"id":([0-9]+)/, '"id":"$1"')) as { id: string; secret: string }
  }

  async function ping(id: string, init: { key?: string; body?: string; type?: string } = {}): Promise<PingAnswer> {
    const headers: Record<string, string> = bearer(init.key ?? manage)
    if (init.body !== undefined) headers['content-type'] = init.type ?? 'application/json'
    const response = await fetch(`${server.origin}/v2/webhook-endpoints/${id}/ping`, { method: 'POST', headers, body: init.body })
    const text = await response.text()
    return { status: response.status, text, result: response.status === 200 ? (JSON.parse(text) as PingAnswer['result']) : (undefined as never) }
  }

  async function withReceiver<T>(work: (hook: Receiver) => Promise<T>): Promise<T> {
    const hook = await receiver()
    try {
      return await work(hook)
    } finally {
      await hook.close()
    }
  }

  it('sends one signed webhook.ping that standardwebhooks verifies, and answers its status; the endpoint is left as it was', async () => {
    await withReceiver(async (hook) => {
      hook.answer = (_delivery, _req, res) => res.writeHead(204).end()
      const endpoint = await create(hook.url)
      await server.importOrders([{ id: 1n, petId: 1n, quantity: 1 }]) // an event after its position, not sent by a ping
      const before = await server.store.webhooks.find(BigInt(endpoint.id))
      const sentAfter = Date.now()

      const answer = await ping(endpoint.id)
      assert.equal(answer.status, 200, answer.text)
      assert.deepEqual(Object.keys(answer.result).sort(), ['durationMs', 'status'])
      assert.equal(answer.result.status, 204)
      assert.ok(Number.isInteger(answer.result.durationMs) && answer.result.durationMs >= 0, answer.text)

      assert.equal(hook.deliveries.length, 1)
      const [delivery] = hook.deliveries
      assert.match(delivery!.headers['webhook-id']!, PING_ID)
      assert.match(delivery!.headers['content-type']!, /^application\/json/)
      const payload = new Webhook(endpoint.secret).verify(delivery!.body, delivery!.headers) as { type: string; timestamp: string; data: unknown }
      assert.deepEqual(Object.keys(payload), ['type', 'timestamp', 'data'])
      assert.equal(payload.type, 'webhook.ping')
      assert.deepEqual(payload.data, { endpointId: endpoint.id })
      assert.match(payload.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      assert.ok(Date.parse(payload.timestamp) >= sentAfter - 1000, 'the timestamp is the time of the ping')
      assert.equal(Number(delivery!.headers['webhook-timestamp']), Math.floor(Date.parse(payload.timestamp) / 1000))

      assert.deepEqual(await server.store.webhooks.find(BigInt(endpoint.id)), before, 'position, status and failures unchanged')
      assert.deepEqual(await server.store.webhooks.attempts(BigInt(endpoint.id), 100), [], 'a ping is not an attempt')
      const second = await ping(endpoint.id)
      assert.equal(second.status, 200)
      assert.equal(hook.deliveries.length, 2)
      assert.notEqual(hook.deliveries[1]!.headers['webhook-id'], delivery!.headers['webhook-id'], 'each ping has its own id')
      const metrics = await (await fetch(`${server.origin}/metrics`)).text()
      assert.doesNotMatch(metrics, /^webhook_deliveries_total\{/m, 'pings are not counted as deliveries')
    })
  })

  it('signs with the previous secret too within a day of a rotation, from the secrets as they are at the ping', async () => {
    await withReceiver(async (hook) => {
      const endpoint = await create(hook.url)
      const rotated = await fetch(`${server.origin}/v2/webhook-endpoints/${endpoint.id}/rotate-secret`, { method: 'POST', headers: bearer(manage) })
      const { secret } = (await rotated.json()) as { secret: string }
      assert.equal((await ping(endpoint.id)).result.status, 200)
      const [delivery] = hook.deliveries
      assert.equal(delivery!.headers['webhook-signature']!.split(' ').length, 2)
      for (const key of [secret, endpoint.secret]) assert.ok(new Webhook(key).verify(delivery!.body, delivery!.headers))

      // A previous secret whose day is over signs no more.
      const id = BigInt(endpoint.id)
      const third = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
      assert.equal(await server.store.webhooks.rotateSecret(id, third, new Date(Date.now() - 1000)), true)
      assert.deepEqual(await server.store.webhooks.signingSecrets(id, new Date()), { current: third, previous: null, previousUntil: null })
      assert.equal(await server.store.webhooks.signingSecrets(9223372036854775807n, new Date()), undefined)
      assert.equal((await ping(endpoint.id)).result.status, 200)
      const last = hook.deliveries[1]!
      assert.equal(last.headers['webhook-signature']!.split(' ').length, 1)
      assert.ok(new Webhook(third).verify(last.body, last.headers))
      assert.throws(() => new Webhook(secret).verify(last.body, last.headers))
    })
  })

  it('pings a disabled endpoint, which stays disabled; a ping while a delivery holds its lease leaves the lease and the position', async () => {
    await withReceiver(async (hook) => {
      const endpoint = await create(hook.url)
      const id = BigInt(endpoint.id)
      await server.importOrders([{ id: 2n, petId: 1n, quantity: 1 }])
      const [lease] = (await server.store.webhooks.lease('test', new Date(), 60_000, 100)).filter((leased) => leased.endpoint.id === id)
      assert.ok(lease !== undefined, 'leased, as a dispatcher delivering to it would')
      assert.equal((await ping(endpoint.id)).result.status, 200)
      assert.equal(hook.deliveries.length, 1)
      assert.equal(await server.store.webhooks.advance(lease, lease.endpoint.position, null), true, 'the lease still holds')
      await server.store.webhooks.release(lease)

      const disabled = await fetch(`${server.origin}/v2/webhook-endpoints/${endpoint.id}`, {
        method: 'PATCH',
        headers: { ...bearer(manage), 'content-type': 'application/json' },
        body: '{"enabled": false}',
      })
      assert.equal(disabled.status, 200)
      const before = await server.store.webhooks.find(id)
      for (const body of [undefined, '{}']) {
        const answer = await ping(endpoint.id, { body })
        assert.deepEqual([answer.status, answer.result.status], [200, 200], answer.text)
      }
      assert.equal(hook.deliveries.length, 3)
      assert.deepEqual(await server.store.webhooks.find(id), before, 'still disabled, at its position')
    })
  })

  it('answers a receiver that fails with its status and the short error, and disables nothing on a 410', async () => {
    await withReceiver(async (hook) => {
      const endpoint = await create(hook.url)
      const before = await server.store.webhooks.find(BigInt(endpoint.id))
      const cases: [number, string][] = [
        [500, 'status 500'],
        [410, 'gone'],
        [302, 'redirect not followed'],
      ]
      for (const [status, error] of cases) {
        hook.answer = (_delivery, _req, res) => res.writeHead(status, { location: 'http://127.0.0.1:9/' }).end('not this')
        const answer = await ping(endpoint.id)
        assert.equal(answer.status, 200, answer.text)
        assert.deepEqual(Object.keys(answer.result).sort(), ['durationMs', 'error', 'status'])
        assert.deepEqual([answer.result.status, answer.result.error], [status, error])
        assert.doesNotMatch(answer.text, /not this/, 'never the response body')
      }
      assert.equal(hook.deliveries.length, 3, 'no redirect followed')
      assert.deepEqual(await server.store.webhooks.find(BigInt(endpoint.id)), before, 'still enabled: a ping changes nothing')
    })
  })

  it('answers an unreachable receiver with the error alone, no status', async () => {
    const hook = await receiver()
    const endpoint = await create(hook.url)
    await hook.close() // nothing listens on its port now
    const answer = await ping(endpoint.id)
    assert.equal(answer.status, 200, answer.text)
    assert.deepEqual(Object.keys(answer.result).sort(), ['durationMs', 'error'])
    assert.equal(answer.result.error, 'connection refused')
  })

  it('ends the delivery when the client that asked for the ping goes away', async () => {
    const lines: string[] = []
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) })
    const patient = await startTestServer(kind, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TIMEOUT_MS: '300000' }, logger })
    const key = await patient.createKey({ scopes: ['webhooks:manage'] })
    await withReceiver(async (hook) => {
      let closed!: () => void
      const connectionClosed = new Promise<void>((resolve) => (closed = resolve))
      hook.answer = (_delivery, _req, res) => res.on('close', closed) // never answered
      const created = await patient.store.webhooks.create({ url: hook.url, eventTypes: ['order.created'], description: null, secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}` }, 100)
      assert.ok(created !== 'too_many')
      const client = new AbortController()
      const asked = fetch(`${patient.origin}/v2/webhook-endpoints/${created.id}/ping`, { method: 'POST', headers: bearer(key), signal: client.signal })
      while (hook.deliveries.length === 0) await new Promise((resolve) => setTimeout(resolve, 10))
      client.abort()
      await assert.rejects(asked)
      await connectionClosed
      // Ended by the abort, not by the delivery's timeout.
      const pinged = async (): Promise<{ error?: string } | undefined> => {
        const line = lines.find((text) => text.includes('"webhook endpoint pinged"'))
        return line === undefined ? undefined : (JSON.parse(line) as { error?: string })
      }
      while ((await pinged()) === undefined) await new Promise((resolve) => setTimeout(resolve, 10))
      assert.equal((await pinged())!.error, 'aborted')
    })
  })

  it('is 409 ping_in_flight while another ping to the endpoint is claimed, sending nothing; a claim whose time is over is taken over', async () => {
    await withReceiver(async (hook) => {
      const endpoint = await create(hook.url)
      const id = BigInt(endpoint.id)
      // A claim as another instance's ping in flight leaves it.
      const now = new Date()
      assert.equal(await server.store.webhooks.claimPing(id, 'ping_elsewhere', now, new Date(now.getTime() + 600_000)), 'claimed')
      const refused = await fetch(`${server.origin}/v2/webhook-endpoints/${endpoint.id}/ping`, { method: 'POST', headers: bearer(manage) })
      const body = await expectError(refused, 409, 'ping_in_flight')
      assert.match(body.message as string, /still in flight/)
      assert.equal(hook.deliveries.length, 0)
      // The same claim whose time is over, as an instance that died mid-ping leaves it.
      await server.store.webhooks.releasePing(id, 'ping_elsewhere')
      assert.equal(await server.store.webhooks.claimPing(id, 'ping_dead', new Date(now.getTime() - 60_000), new Date(now.getTime() - 1)), 'claimed')
      assert.equal((await ping(endpoint.id)).status, 200)
      assert.equal(hook.deliveries.length, 1)
      // Released once answered: claimed again at once, by anyone.
      assert.equal(await server.store.webhooks.claimPing(id, 'ping_after', new Date(), new Date(Date.now() + 1000)), 'claimed')
      assert.equal(await server.store.webhooks.claimPing(id, 'ping_other', new Date(), new Date(Date.now() + 1000)), 'in_flight')
      await server.store.webhooks.releasePing(id, 'ping_other') // not its claim: nothing
      assert.equal(await server.store.webhooks.claimPing(id, 'ping_other', new Date(), new Date(Date.now() + 1000)), 'in_flight')
      await server.store.webhooks.releasePing(id, 'ping_after')
      assert.equal(await server.store.webhooks.claimPing(9223372036854775807n, 'ping_none', new Date(), new Date()), undefined)
      // A claim goes with its endpoint.
      assert.equal(await server.store.webhooks.claimPing(id, 'ping_last', new Date(), new Date(Date.now() + 600_000)), 'claimed')
      assert.equal(await server.store.webhooks.remove(id), true)
      assert.equal((await ping(endpoint.id)).status, 404)
    })
  })

  it("counts each ping against its API key's rate limit: past it, 429 rate_limited and nothing sent", async () => {
    const limited = await startTestServer(kind, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', RATE_LIMIT_PER_KEY: '3' } })
    const key = await limited.createKey({ scopes: ['webhooks:manage'] })
    await withReceiver(async (hook) => {
      const created = await limited.store.webhooks.create({ url: hook.url, eventTypes: ['order.created'], description: null, secret: `whsec_${Buffer.alloc(32, 2).toString('base64')}` }, 100)
      assert.ok(created !== 'too_many')
      const url = `${limited.origin}/v2/webhook-endpoints/${created.id}/ping`
      for (let i = 0; i < 3; i++) {
        const answer = await fetch(url, { method: 'POST', headers: bearer(key) })
        assert.equal(answer.status, 200, await answer.text())
        assert.match(answer.headers.get('ratelimit') ?? '', new RegExp(`^"per-key";r=${2 - i};t=\\d+$`))
      }
      const refused = await fetch(url, { method: 'POST', headers: bearer(key) })
      await expectError(refused, 429, 'rate_limited')
      assert.ok(Number(refused.headers.get('retry-after')) >= 1)
      assert.equal(hook.deliveries.length, 3, 'the refused ping was not sent')
    })
  })

  it('is 404 for an unknown endpoint, 400 for a bad id, body or query, 415 for a body not JSON, 403 without webhooks:manage, 401 without a key', async () => {
    await withReceiver(async (hook) => {
      const endpoint = await create(hook.url)
      for (const id of ['9223372036854775807', '0']) {
        const answer = await ping(id)
        assert.equal(answer.status, 404, answer.text)
        assert.equal((JSON.parse(answer.text) as { code: string }).code, 'webhook_endpoint_not_found')
      }
      for (const id of ['abc', '9223372036854775808']) {
        const answer = await ping(id)
        assert.equal((JSON.parse(answer.text) as { code: string }).code, 'invalid_endpoint_id')
      }
      for (const body of ['{"url": "http://elsewhere/"}', '[]', 'null']) {
        const answer = await ping(endpoint.id, { body })
        assert.deepEqual([answer.status, (JSON.parse(answer.text) as { code: string }).code], [400, 'invalid_body'], body)
      }
      const text = await ping(endpoint.id, { body: 'ping', type: 'text/plain' })
      assert.deepEqual([text.status, (JSON.parse(text.text) as { code: string }).code], [415, 'unsupported_media_type'])
      await expectError(await fetch(`${server.origin}/v2/webhook-endpoints/${endpoint.id}/ping?now=1`, { method: 'POST', headers: bearer(manage) }), 400, 'invalid_parameter')
      const reader = await server.createKey({ scopes: ['orders:read', 'orders:write'] })
      const forbidden = await fetch(`${server.origin}/v2/webhook-endpoints/${endpoint.id}/ping`, { method: 'POST', headers: bearer(reader) })
      await expectError(forbidden, 403, 'insufficient_scope')
      assert.match(forbidden.headers.get('www-authenticate') ?? '', /scope="webhooks:manage"/)
      await expectError(await fetch(`${server.origin}/v2/webhook-endpoints/${endpoint.id}/ping`, { method: 'POST' }), 401, 'unauthorized')
      assert.equal(hook.deliveries.length, 0, 'nothing was sent for a refused request')
    })
  })
})
