import assert from 'node:assert/strict'
import { before, it } from 'node:test'
// The client's workspace package, as a user imports it: its built dist (npm run build first).
import { createV2Client, type PetstoreV2Client } from '@petstore-orders/client'
import { forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { expectApiError } from './support/client.js'
import { receiver } from './support/webhook-receiver.js'

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/
const PUBLIC_URL = 'https://93.184.215.14/hooks'

/** The endpoint as get and list show it: the creation's answer without its secret. */
function withoutSecret<T extends { secret?: string }>(created: T): Omit<T, 'secret'> {
  const shown: Partial<T> = { ...created }
  delete shown.secret
  return shown as Omit<T, 'secret'>
}

forEachStore('TypeScript client, webhook endpoints', (kind) => {
  let server: TestServer
  let client: PetstoreV2Client

  before(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_MAX_ENDPOINTS: '2' } })
    client = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] }) })
    await server.importOrders([{ id: 1n, petId: 1n, quantity: 1 }, { id: 2n, petId: 1n, quantity: 1 }])
  })

  it('creates, lists, shows, updates and deletes endpoints; ids are bigints', async () => {
    const created = await client.createWebhookEndpoint({ url: PUBLIC_URL, eventTypes: ['order.cancelled', 'order.shipped'], description: 'dispatch' })
    assert.equal(typeof created.id, 'bigint')
    assert.match(created.secret, SECRET)
    assert.deepEqual(created.eventTypes, ['order.shipped', 'order.cancelled'])
    assert.equal(created.status, 'enabled')
    assert.equal(created.description, 'dispatch')
    const endpoint = withoutSecret(created)

    assert.deepEqual(await client.getWebhookEndpoint(created.id), endpoint)
    assert.deepEqual(await client.getWebhookEndpoint(String(created.id)), endpoint)
    assert.deepEqual(await client.listWebhookEndpoints(), [endpoint])

    const disabled = await client.updateWebhookEndpoint(created.id, { enabled: false, description: '' })
    assert.equal(disabled.status, 'disabled')
    assert.equal(disabled.disabledReason, 'disabled_by_request')
    assert.equal(disabled.description, undefined)
    const enabled = await client.updateWebhookEndpoint(created.id, { enabled: true })
    assert.equal(enabled.status, 'enabled')
    assert.equal(enabled.position, created.position)

    await client.deleteWebhookEndpoint(created.id)
    await expectApiError(client.getWebhookEndpoint(created.id), 404, 'webhook_endpoint_not_found')
    await expectApiError(client.deleteWebhookEndpoint(created.id), 404, 'webhook_endpoint_not_found')
    assert.deepEqual(await client.listWebhookEndpoints(), [])
  })

  it('rotates the secret, replays from a cursor and lists attempts', async () => {
    const created = await client.createWebhookEndpoint({ url: PUBLIC_URL })
    const secret = await client.rotateWebhookSecret(created.id)
    assert.match(secret, SECRET)
    assert.notEqual(secret, created.secret)

    const replayed = await client.replayWebhookEndpoint(created.id, 1n)
    assert.equal(replayed.position, '1')
    assert.equal((await client.replayWebhookEndpoint(created.id, '2')).position, '2')
    await expectApiError(client.replayWebhookEndpoint(created.id, 'nope'), 400, 'invalid_cursor')
    await expectApiError(client.replayWebhookEndpoint(created.id, 10n ** 15n), 400, 'invalid_cursor')

    assert.deepEqual(await client.listWebhookAttempts(created.id), [])
    await client.replayWebhookEndpoint(created.id, '1') // event 2 ahead of it: the store leases it
    const [lease] = await server.store.webhooks.lease('test', new Date(), 30_000, 10)
    assert.ok(lease !== undefined)
    await server.store.webhooks.fail(lease, { eventId: 2n, attemptedAt: new Date().toISOString(), status: 503, error: null, durationMs: 12 }, { retryAt: new Date(Date.now() + 60_000) })
    const attempts = await client.listWebhookAttempts(created.id, { limit: 5 })
    assert.deepEqual(attempts.map(({ eventId, status, durationMs }) => ({ eventId, status, durationMs })), [{ eventId: '2', status: 503, durationMs: 12 }])
    await expectApiError(client.listWebhookAttempts(created.id, { limit: 0 }), 400, 'invalid_parameter')
    await client.deleteWebhookEndpoint(created.id)
  })

  it('rejects with the API error: invalid_webhook_url, invalid_body, webhook_endpoint_limit, insufficient_scope', async () => {
    const error = await expectApiError(client.createWebhookEndpoint({ url: 'https://127.0.0.1/' }), 400, 'invalid_webhook_url')
    assert.match(error.message, /private/)
    await expectApiError(client.createWebhookEndpoint({ url: PUBLIC_URL, eventTypes: [] }), 400, 'invalid_body')
    const made = [await client.createWebhookEndpoint({ url: PUBLIC_URL }), await client.createWebhookEndpoint({ url: PUBLIC_URL })]
    await expectApiError(client.createWebhookEndpoint({ url: PUBLIC_URL }), 409, 'webhook_endpoint_limit')
    const reader = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey({ scopes: ['orders:read'] }) })
    await expectApiError(reader.listWebhookEndpoints(), 403, 'insufficient_scope')
    const manager = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey({ scopes: ['webhooks:manage'] }) })
    await expectApiError(manager.createWebhookEndpoint({ url: PUBLIC_URL }), 403, 'insufficient_scope')
    await expectApiError(manager.replayWebhookEndpoint(made[0]!.id, '1'), 403, 'insufficient_scope')
    for (const endpoint of made) await client.deleteWebhookEndpoint(endpoint.id)
    await assert.rejects(client.getWebhookEndpoint(1 as unknown as bigint), TypeError, 'a JS number is refused: it may not be exact')
  })

  it('pings an endpoint, with webhooks:manage alone: the status its receiver answered, or the short error', async () => {
    const open = await startTestServer(kind, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } })
    const admin = createV2Client({ baseUrl: `${open.origin}/v2`, apiKey: await open.createKey({ scopes: ['orders:read', 'webhooks:manage'] }) })
    const manager = createV2Client({ baseUrl: `${open.origin}/v2`, apiKey: await open.createKey({ scopes: ['webhooks:manage'] }) })
    const hook = await receiver()
    try {
      const created = await admin.createWebhookEndpoint({ url: hook.url })
      const result = await manager.pingWebhookEndpoint(created.id)
      assert.deepEqual(Object.keys(result).sort(), ['durationMs', 'status'])
      assert.equal(result.status, 200)
      assert.match(hook.deliveries[0]!.id, /^ping_[0-9a-f]{24}$/)
      hook.answer = (_delivery, _req, res) => res.writeHead(500).end()
      const failed = await manager.pingWebhookEndpoint(String(created.id))
      assert.deepEqual([failed.status, failed.error], [500, 'status 500'])
      await expectApiError(manager.pingWebhookEndpoint(9223372036854775807n), 404, 'webhook_endpoint_not_found')
    } finally {
      await hook.close()
    }
  })
})
