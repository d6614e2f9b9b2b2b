import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { generateApiKey } from '../src/domain/api-keys.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import type { WebhookEndpoint } from '../src/domain/webhooks.js'
import { createDatabase, type TestDatabaseHandle } from './support/harness.js'
import { spawnServer } from './support/server-process.js'
import { receiver, type Receiver } from './support/webhook-receiver.js'

// A `serve` process shares one Deliverer between its dispatcher and the API's pings. Stopped while
// a feed delivery and a ping are both in flight, it lets each finish, whichever ends first: the
// deliverer is closed only once both are done.
describe('webhooks: a stop lets the delivery and the ping in flight finish', () => {
  let database: TestDatabaseHandle
  let store: Store
  let key: string
  const receivers: Receiver[] = []

  before(async () => {
    database = await createDatabase('sqlite')
    store = await openStore(database.config)
    await store.migrate()
    const generated = generateApiKey()
    await store.apiKeys.create({ name: 'stop', hash: generated.hash, displayPrefix: generated.displayPrefix, scopes: ['webhooks:manage'], expiresAt: null })
    key = generated.secret
  })
  after(async () => {
    for (const receiving of receivers) await receiving.close()
    await store.close()
    await database.dispose()
  })

  /** A receiver that holds every request until it is told to answer it. */
  async function holdingReceiver(): Promise<{ receiving: Receiver; held: ServerResponse[] }> {
    const receiving = await receiver()
    receivers.push(receiving)
    const held: ServerResponse[] = []
    receiving.answer = (_delivery, _req, res) => void held.push(res)
    return { receiving, held }
  }

  async function endpoint(url: string, eventTypes: WebhookEndpoint['eventTypes']): Promise<WebhookEndpoint> {
    const created = await store.webhooks.create({ url, eventTypes, description: null, secret: `whsec_${randomBytes(32).toString('base64')}` }, 100)
    assert.notEqual(created, 'too_many')
    return created as WebhookEndpoint
  }

  async function until(check: () => boolean | Promise<boolean>): Promise<void> {
    while (!(await check())) await sleep(10)
  }

  for (const first of ['delivery', 'ping'] as const) {
    it(`the ${first} answered first, the other after: both complete, and the process exits 0`, async () => {
      for (const existing of await store.webhooks.list()) await store.webhooks.remove(existing.id)
      const feed = await holdingReceiver()
      const pinged = await holdingReceiver()
      const server = await spawnServer(database.url, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TIMEOUT_MS: '120000', SHUTDOWN_TIMEOUT_MS: '60000' })
      try {
        const feedEndpoint = await endpoint(feed.receiving.url, ['order.created'])
        const placed = await store.orders.place({ order: { petId: 3n, quantity: 1, shipDate: null } })
        assert.equal(placed.outcome, 'placed')
        await until(() => feed.held.length === 1) // the dispatcher's delivery, held
        const eventId = BigInt(feed.receiving.deliveries[0]!.id)

        const pingEndpoint = await endpoint(pinged.receiving.url, ['order.cancelled'])
        const ping = fetch(`${server.origin}/v2/webhook-endpoints/${pingEndpoint.id}/ping`, { method: 'POST', headers: { authorization: `Bearer ${key}` } })
        await until(() => pinged.held.length === 1) // the ping, held

        server.child.kill('SIGTERM')
        // Stopping: the server no longer accepts connections.
        await until(() => fetch(`${server.origin}/healthz`).then(() => false, () => true))
        const answerPing = (): void => void pinged.held[0]!.writeHead(204).end()
        const answerDelivery = (): void => void feed.held[0]!.writeHead(200).end()
        if (first === 'ping') {
          answerPing()
          const answered = await ping
          assert.deepEqual([answered.status, ((await answered.json()) as { status?: number }).status], [200, 204])
          await sleep(300) // the app closes meanwhile; the dispatcher's delivery is still in flight
          answerDelivery()
        } else {
          answerDelivery()
          await until(async () => (await store.webhooks.find(feedEndpoint.id))!.position === eventId)
          await sleep(300) // the dispatcher stops meanwhile; the ping is still in flight
          answerPing()
          const answered = await ping
          assert.deepEqual([answered.status, ((await answered.json()) as { status?: number }).status], [200, 204])
        }
        const exited = await server.exited
        assert.deepEqual(exited, { code: 0, signal: null }, server.output())
        assert.equal((await store.webhooks.find(feedEndpoint.id))!.position, eventId, 'the delivery in flight was recorded')
        const [attempt] = (await store.webhooks.attempts(feedEndpoint.id, 1))!
        assert.deepEqual([attempt!.eventId, attempt!.status, attempt!.error], [eventId, 200, null])
      } finally {
        if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL')
      }
    })
  }
})
