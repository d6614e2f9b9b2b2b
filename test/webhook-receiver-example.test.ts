import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { parse, stringify } from 'lossless-json'
import { Webhook } from 'standardwebhooks'
import { Webhook as SvixWebhook } from 'svix'
import { webhookReceiver, type Delivery } from '../docs/examples/webhook-receiver.js'
import { svixReceiver, type SvixDelivery } from '../docs/examples/webhook-receiver-svix.js'
import { Deliverer } from '../src/webhooks/delivery.js'
import { WebhookDispatcher } from '../src/webhooks/dispatcher.js'
import { bearer, startTestServer, within, type TestServer } from './support/harness.js'

const BEYOND_2_53 = 9_007_199_254_740_993n

/** A delivery as the service builds it: the feed's event JSON, unchanged, as `data`. */
function deliveryBody(event: { type: string; occurredAt: string }, eventJson: string): string {
  return `{"type":${JSON.stringify(event.type)},"timestamp":${JSON.stringify(event.occurredAt)},"data":${eventJson}}`
}

function signed(secrets: string[], id: string, body: string, at = new Date()): Record<string, string> {
  const signatures = secrets.map((secret) => new Webhook(secret).sign(id, at, body))
  return { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signatures.join(' ') }
}

describe('docs/examples/webhook-receiver.ts', () => {
  let server: TestServer
  let secret: string
  let event: { id: string; type: string; occurredAt: string }
  let eventJson: string

  before(async () => {
    server = await startTestServer('sqlite', { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } })
    const key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    const created = await fetch(`${server.origin}/v2/webhook-endpoints`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'http://127.0.0.1:9/webhooks/petstore' }),
    })
    secret = ((await created.json()) as { secret: string }).secret
    await server.importOrders([{ id: BEYOND_2_53, petId: 7n, quantity: 2 }])
    const feed = parse(await (await fetch(`${server.origin}/v2/store/order-events`, { headers: bearer(key) })).text()) as { data: unknown[] }
    eventJson = stringify(feed.data.at(-1))!
    event = JSON.parse(eventJson) as typeof event
  })

  async function receiver(handled: Delivery[]) {
    const app = webhookReceiver({ secret, handle: async (delivery) => void handled.push(delivery) })
    const origin = await app.listen({ host: '127.0.0.1', port: 0 })
    after(() => app.close())
    return { url: `${origin}/webhooks/petstore` }
  }

  it('verifies a delivery signed with the endpoint\'s secret, reads its ids exactly, and handles a webhook-id once', async () => {
    const handled: Delivery[] = []
    const { url } = await receiver(handled)
    const body = deliveryBody(event, eventJson)
    const first = await fetch(url, { method: 'POST', headers: signed([secret], event.id, body), body })
    assert.equal(first.status, 204)
    assert.equal(handled.length, 1)
    assert.equal(handled[0]!.data.id, event.id)
    assert.equal(handled[0]!.data.order.id, BEYOND_2_53, 'the order id is exact')
    assert.equal(handled[0]!.type, 'order.created')

    const again = await fetch(url, { method: 'POST', headers: signed([secret], event.id, body), body })
    assert.equal(again.status, 204, 'a retry is acknowledged')
    assert.equal(handled.length, 1, 'and not handled twice')
  })

  it('accepts either signature during a rotation, and refuses a bad signature, an altered body or an old timestamp (401)', async () => {
    const handled: Delivery[] = []
    const { url } = await receiver(handled)
    const body = deliveryBody(event, eventJson)
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
    const rotated = await fetch(url, { method: 'POST', headers: signed([other, secret], '901', body), body })
    assert.equal(rotated.status, 204)
    const wrong = await fetch(url, { method: 'POST', headers: signed([other], '902', body), body })
    assert.equal(wrong.status, 401)
    const altered = await fetch(url, { method: 'POST', headers: signed([secret], '903', body), body: body.replace('"quantity":2', '"quantity":3') })
    assert.equal(altered.status, 401)
    const old = await fetch(url, { method: 'POST', headers: signed([secret], '904', body, new Date(Date.now() - 3_600_000)), body })
    assert.equal(old.status, 401)
    const unsigned = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    assert.equal(unsigned.status, 401)
    assert.equal(handled.length, 1, 'only the delivery signed with a secret of the endpoint')
  })
})

describe('docs/webhooks.md', () => {
  // Each receiver the doc shows, by the package it verifies with.
  for (const [file, library] of [['webhook-receiver.ts', 'standardwebhooks'], ['webhook-receiver-svix.ts', 'svix']] as const) {
    it(`shows the ${library} receiver as docs/examples/${file} has it, line for line`, () => {
      const doc = readFileSync(new URL('../docs/webhooks.md', import.meta.url), 'utf8')
      const example = new Set(readFileSync(new URL(`../docs/examples/${file}`, import.meta.url), 'utf8').split('\n').map((line) => line.trim()))
      const block = [...doc.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!).find((text) => text.includes(`from '${library}'`))
      assert.ok(block !== undefined, `the doc shows the ${library} receiver`)
      const lines = block.split('\n').map((line) => line.trim()).filter((line) => line !== '')
      assert.ok(lines.length > 20)
      for (const line of lines) assert.ok(example.has(line), `not in the example file: ${line}`)
    })
  }
})

describe('docs/examples/webhook-receiver.ts receiving real deliveries', () => {
  it('verifies and handles each event the dispatcher sends, in feed order, also after a rotation', async () => {
    const server = await startTestServer('sqlite', { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } })
    const key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    const api = (method: string, path: string, body?: object) =>
      fetch(`${server.origin}/v2/webhook-endpoints${path}`, {
        method,
        headers: { ...bearer(key), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    // The receiver needs the secret, the endpoint the receiver's URL: created first, pointed at it next.
    const created = (await (await api('POST', '', { url: 'http://127.0.0.1:9/', eventTypes: ['order.created', 'order.shipped'] })).json()) as { id: number; secret: string }
    const handled: Delivery[] = []
    const app = webhookReceiver({ secret: created.secret, handle: async (delivery) => void handled.push(delivery) })
    const origin = await app.listen({ host: '127.0.0.1', port: 0 })
    after(() => app.close())
    assert.equal((await api('PATCH', `/${created.id}`, { url: `${origin}/webhooks/petstore` })).status, 200)

    const deliverer = new Deliverer({ timeoutMs: 5000, allowPrivateNetworks: true })
    const dispatcher = new WebhookDispatcher({
      webhooks: server.store.webhooks,
      dataVersion: () => server.store.orders.dataVersion(),
      deliver: (request, signal) => deliverer.deliver(request, signal),
      timeoutMs: 5000,
      retryScheduleMs: [100],
      log: { info: () => {}, warn: () => {} },
    })
    dispatcher.start()
    after(async () => {
      await dispatcher.stop(0)
      deliverer.close()
    })

    await server.importOrders([{ id: BEYOND_2_53, petId: 7n, quantity: 2 }])
    await server.store.orders.cancel(BEYOND_2_53, null, null) // order.cancelled: not among its types
    await server.importOrders([{ id: BEYOND_2_53 + 1n, petId: 7n, quantity: 1, status: 'shipped' }])
    await within(10_000, 'two deliveries handled', () => handled.length === 2, 20)
    assert.deepEqual(handled.map((delivery) => [delivery.type, delivery.data.order.id]), [
      ['order.created', BEYOND_2_53],
      ['order.created', BEYOND_2_53 + 1n],
    ])
    assert.ok(BigInt(handled[0]!.data.id) < BigInt(handled[1]!.data.id), 'in feed order')

    // Rotated: deliveries carry the new and the old signature; the receiver, still on the old secret, verifies them.
    assert.equal((await api('POST', `/${created.id}/rotate-secret`)).status, 200)
    await server.importOrders([{ id: BEYOND_2_53 + 2n, petId: 7n, quantity: 1 }])
    await within(10_000, 'the delivery after the rotation handled', () => handled.length === 3, 20)
    // The attempt is recorded once the dispatcher has its 204, just after the handler ran.
    let attempts: { status?: number }[] = []
    await within(10_000, 'three attempts recorded', async () => {
      attempts = ((await (await api('GET', `/${created.id}/attempts`)).json()) as { data: { status?: number }[] }).data
      return attempts.length >= 3
    })
    assert.deepEqual(attempts.map((attempt) => attempt.status), [204, 204, 204])

    // A ping is verified and answered, and handles nothing: it carries no event.
    const pinged = await api('POST', `/${created.id}/ping`)
    assert.equal(pinged.status, 200)
    assert.equal(((await pinged.json()) as { status?: number }).status, 204)
    assert.equal(handled.length, 3)
  })
})

describe('docs/examples/webhook-receiver-svix.ts', () => {
  const EXACT = '9007199254740993' // 2^53 + 1

  it("needs its own parse: svix's Webhook.verify returns JSON.parse(body), which rounds an id past 2^53", () => {
    const secret = `whsec_${Buffer.alloc(32, 3).toString('base64')}`
    const body = `{"type":"order.created","data":{"order":{"id":${EXACT}}}}`
    const at = new Date()
    const svix = new SvixWebhook(secret)
    const headers = { 'webhook-id': '1', 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': svix.sign('1', at, body) }
    const verified = svix.verify(Buffer.from(body), headers) as { data: { order: { id: unknown } } }
    assert.equal(typeof verified.data.order.id, 'number')
    assert.notEqual(BigInt(verified.data.order.id as number), BigInt(EXACT), 'svix kept the id exact: the doc says it does not')
  })

  /** Polls `condition` until it holds, bounded by the test's timeout only. */
  async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
    while (!(await condition())) await sleep(20)
  }

  it('verifies a real delivery of an order whose id is past 2^53 and reads the id exactly; refuses a bad signature (401)', { timeout: 60_000 }, async () => {
    const server = await startTestServer('sqlite', { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } })
    after(() => server.close())
    const key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    const api = (method: string, path: string, body?: object) =>
      fetch(`${server.origin}/v2/webhook-endpoints${path}`, {
        method,
        headers: { ...bearer(key), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    const created = (await (await api('POST', '', { url: 'http://127.0.0.1:9/', eventTypes: ['order.created'] })).json()) as { id: number; secret: string }
    const handled: [SvixDelivery, string][] = []
    const receiver = svixReceiver(created.secret, async (delivery, webhookId) => void handled.push([delivery, webhookId]))
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    after(() => new Promise<void>((resolve) => receiver.close(() => resolve())))
    const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/webhooks/petstore`
    assert.equal((await api('PATCH', `/${created.id}`, { url })).status, 200)

    const deliverer = new Deliverer({ timeoutMs: 5000, allowPrivateNetworks: true })
    const dispatcher = new WebhookDispatcher({
      webhooks: server.store.webhooks,
      dataVersion: () => server.store.orders.dataVersion(),
      deliver: (request, signal) => deliverer.deliver(request, signal),
      timeoutMs: 5000,
      retryScheduleMs: [100],
      log: { info: () => {}, warn: () => {} },
    })
    dispatcher.start()
    after(async () => {
      await dispatcher.stop(0)
      deliverer.close()
    })

    await server.importOrders([{ id: BigInt(EXACT), petId: 7n, quantity: 2 }])
    await until(() => handled.length === 1)
    const [delivery, webhookId] = handled[0]!
    assert.equal(delivery.type, 'order.created')
    assert.equal(delivery.data.order.id, BigInt(EXACT), 'the order id is exact')
    assert.equal(webhookId, delivery.data.id)
    let attempts: { status?: number }[] = []
    await until(async () => {
      attempts = ((await (await api('GET', `/${created.id}/attempts`)).json()) as { data: { status?: number }[] }).data
      return attempts.length >= 1
    })
    assert.deepEqual(attempts.map((attempt) => attempt.status), [204], 'the receiver answered the delivery 204')

    // A ping is verified and answered, and handles nothing: it carries no event (a handler reading
    // its order would throw, and the ping would be a 500).
    const pinged = await api('POST', `/${created.id}/ping`)
    assert.equal(pinged.status, 200)
    assert.equal(((await pinged.json()) as { status?: number }).status, 204)
    assert.equal(handled.length, 1)

    const body = '{"type":"order.created"}'
    const forged = await fetch(url, { method: 'POST', headers: signed([`whsec_${Buffer.alloc(32, 9).toString('base64')}`], '77', body), body })
    assert.equal(forged.status, 401)
    assert.equal(handled.length, 1)
  })
})
