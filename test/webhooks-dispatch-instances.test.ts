import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Webhook } from 'standardwebhooks'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import type { WebhookEndpoint } from '../src/domain/webhooks.js'
import { createDatabase, forEachStore, within, type TestDatabaseHandle } from './support/harness.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'
import { receiver, type Receiver } from './support/webhook-receiver.js'

const ENV = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms' }

// `serve` processes on one database share the endpoints through leases: each endpoint's events
// arrive in order, none twice, never two at once; a killed instance's endpoint is taken over.
forEachStore('webhook dispatch across instances', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  const processes: ServerProcess[] = []
  const receivers: Receiver[] = []

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
  })
  after(async () => {
    for (const child of processes) {
      if (child.child.exitCode === null && child.child.signalCode === null) {
        child.child.kill('SIGTERM')
        await child.exited
      }
    }
    for (const receiving of receivers) await receiving.close()
    await store.close()
    await database.dispose()
  })

  async function serveProcess(env: Record<string, string> = {}): Promise<ServerProcess> {
    const child = await spawnServer(database.url, { ...ENV, ...env })
    processes.push(child)
    return child
  }

  /** Its receiver answers after a few milliseconds, so two instances delivering to it at once would overlap. */
  async function endpointWithReceiver(): Promise<{ endpoint: WebhookEndpoint; receiving: Receiver; secret: string }> {
    const secret = `whsec_${randomBytes(32).toString('base64')}`
    const receiving = await receiver()
    receiving.answer = (_delivery, _req, res) => void setTimeout(() => res.end(), 3)
    receivers.push(receiving)
    const endpoint = await store.webhooks.create({ url: receiving.url, eventTypes: ['order.created'], description: null, secret }, 100)
    assert.notEqual(endpoint, 'too_many')
    return { endpoint: endpoint as WebhookEndpoint, receiving, secret }
  }

  /** The webhook-id of each delivery, in arrival order, each checked to verify with the endpoint's secret. */
  function verifiedIds(receiving: Receiver, secret: string): string[] {
    const verifier = new Webhook(secret)
    for (const delivery of receiving.deliveries) verifier.verify(delivery.body, delivery.headers)
    return receiving.deliveries.map((delivery) => delivery.id)
  }

  async function placeOrders(count: number): Promise<string[]> {
    const head = (await store.events.read(undefined, 100_000)).next
    for (let i = 0; i < count; i++) assert.equal((await store.orders.place({ order: { petId: 3n, quantity: 1, shipDate: null } })).outcome, 'placed')
    const page = await store.events.read(head, 100_000)
    return [...page.json.toString().matchAll(/"id":"(\d+)"/g)].map((match) => match[1]!)
  }

  it('two instances never deliver to one endpoint at once, and every event arrives once, in order', async () => {
    const endpoints = await Promise.all(Array.from({ length: 4 }, () => endpointWithReceiver()))
    await Promise.all([serveProcess(), serveProcess()])
    const positions: string[] = []
    // In bursts, so leases move between the instances as endpoints catch up and are leased again.
    for (let burst = 0; burst < 6; burst++) {
      positions.push(...(await placeOrders(10)))
      await sleep(150)
    }
    for (const { receiving } of endpoints) {
      await within(30_000, 'every event delivered', () => receiving.deliveries.length >= positions.length)
    }
    await sleep(500)
    for (const { receiving, secret } of endpoints) {
      assert.deepEqual(verifiedIds(receiving, secret), positions)
      assert.equal(receiving.overlaps, 0)
    }
    // The metrics of the instances: deliveries by outcome, their durations, each endpoint caught up.
    const scrapes = await Promise.all(processes.map(async (child) => (await fetch(`${child.origin}/metrics`)).text()))
    const succeeded = scrapes.map((text) => Number(/^webhook_deliveries_total\{outcome="success"\} (\d+)$/m.exec(text)?.[1] ?? 0))
    assert.equal(succeeded[0]! + succeeded[1]!, 4 * positions.length)
    assert.match(scrapes.join(''), /^webhook_delivery_duration_seconds_count\{outcome="success"\} \d+$/m)
    for (const { endpoint } of endpoints) assert.match(scrapes[0]!, new RegExp(`^webhook_endpoint_lag_events\\{endpoint="${endpoint.id}"\\} 0$`, 'm'))
    for (const { endpoint } of endpoints) await store.webhooks.remove(endpoint.id)
    for (const child of processes.splice(0)) {
      child.child.kill('SIGTERM')
      assert.deepEqual(await child.exited, { code: 0, signal: null })
    }
  })

  it('an instance killed mid-delivery: another takes over after the lease expires, only the event in flight twice', async () => {
    const { receiving, secret } = await endpointWithReceiver()
    // The hold is armed before any order is placed: the instance may deliver the events before
    // their positions are read, so the fourth delivery is held by its count, not by its id.
    let held: string | undefined
    receiving.answer = ({ id }, _req, res) => {
      if (receiving.deliveries.length === 4 && held === undefined) held = id // never answered: the instance dies first
      else res.end()
    }
    // A 3 s timeout: the lease is 2 × 3 s + 5 s = 11 s.
    const first = await serveProcess({ WEBHOOK_TIMEOUT_MS: '3000' })
    const positions = await placeOrders(6)
    await within(15_000, 'the fourth event in flight', () => held !== undefined)
    assert.equal(held, positions[3])
    first.child.kill('SIGKILL')
    assert.equal((await first.exited).signal, 'SIGKILL')
    await serveProcess({ WEBHOOK_TIMEOUT_MS: '3000' })
    await within(40_000, 'every event delivered', () => receiving.deliveries.at(-1)?.id === positions[5])
    await sleep(500)
    assert.deepEqual(verifiedIds(receiving, secret), [...positions.slice(0, 4), ...positions.slice(3)])
    assert.equal(receiving.overlaps, 0)
    // Not before the killed instance's lease expired: an attempt starts with at least the timeout
    // + 2 s of its lease left, so the event is sent again no sooner than about 5 s after.
    const gap = receiving.deliveries[4]!.at - receiving.deliveries[3]!.at
    assert.ok(gap >= 4000, `sent again ${Math.round(gap)} ms later`)
  })
})
