import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, afterEach, before, beforeEach, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Webhook } from 'standardwebhooks'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import type { WebhookEndpoint } from '../src/domain/webhooks.js'
import { Deliverer } from '../src/webhooks/delivery.js'
import { WebhookDispatcher } from '../src/webhooks/dispatcher.js'
import { createDatabase, forEachStore, within, type TestDatabaseHandle } from './support/harness.js'
import { connectSql } from './support/sql.js'
import { receiver, type Answer } from './support/webhook-receiver.js'

const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`
const log = { lines: [] as { fields: object; message: string }[], info() {}, warn(fields: object, message: string) { log.lines.push({ fields, message }) } }

forEachStore('webhook dispatcher', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  const cleanups: (() => Promise<void> | void)[] = []

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
  })
  after(async () => {
    await store.close()
    await database.dispose()
  })
  beforeEach(() => {
    log.lines.length = 0
  })
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
    // Endpoints of one test are not served in the next.
    for (const endpoint of await store.webhooks.list()) await store.webhooks.remove(endpoint.id)
  })

  async function dispatcher(
    options: { timeoutMs?: number; retryScheduleMs?: number[]; pace?: () => Promise<void> | undefined; maxInFlight?: number; turnMs?: number; sweepIntervalMs?: number } = {},
  ): Promise<WebhookDispatcher> {
    const timeoutMs = options.timeoutMs ?? 5000
    const deliverer = new Deliverer({ timeoutMs, allowPrivateNetworks: true })
    const value = new WebhookDispatcher({
      webhooks: store.webhooks,
      dataVersion: () => store.orders.dataVersion(),
      deliver: (request, signal) => deliverer.deliver(request, signal),
      timeoutMs,
      retryScheduleMs: options.retryScheduleMs ?? [100, 100, 100],
      log,
      pace: options.pace,
      maxInFlight: options.maxInFlight,
      turnMs: options.turnMs,
      sweepIntervalMs: options.sweepIntervalMs,
    })
    value.start()
    cleanups.push(async () => {
      await value.stop(0)
      deliverer.close()
    })
    return value
  }

  async function hook(): Promise<Awaited<ReturnType<typeof receiver>>> {
    const value = await receiver()
    cleanups.push(() => value.close())
    return value
  }

  async function endpoint(url: string, secret = newSecret()): Promise<WebhookEndpoint & { secret: string }> {
    const created = await store.webhooks.create({ url, eventTypes: ['order.created', 'order.cancelled'], description: null, secret }, 100)
    assert.notEqual(created, 'too_many')
    return { ...(created as WebhookEndpoint), secret }
  }

  /** Places `count` orders, one order.created event each; the events' positions, ascending. */
  async function placeOrders(count: number): Promise<string[]> {
    const head = (await store.events.read(undefined, 100_000)).next
    for (let i = 0; i < count; i++) {
      const result = await store.orders.place({ order: { petId: 1n, quantity: 1, shipDate: null } })
      assert.equal(result.outcome, 'placed')
    }
    const events = await feedAfter(head)
    assert.equal(events.length, count)
    return events.map((event) => event.id)
  }

  async function feedAfter(after: bigint): Promise<{ id: string; type: string }[]> {
    const page = await store.events.read(after, 10_000)
    return [...page.json.toString().matchAll(/"id":"(\d+)","type":"([a-z.]+)"/g)].map((match) => ({ id: match[1]!, type: match[2]! }))
  }

  it('delivers every event in feed order, once, signed so standardwebhooks verifies it', async () => {
    const receiving = await hook()
    const target = await endpoint(receiving.url)
    await dispatcher()
    const positions = await placeOrders(30)
    await within(10_000, 'every event delivered', () => receiving.deliveries.length >= 30)
    await sleep(300) // nothing more comes
    assert.deepEqual(receiving.deliveries.map((d) => d.id), positions)
    const verifier = new Webhook(target.secret)
    for (const delivery of receiving.deliveries) {
      const payload = verifier.verify(delivery.body, delivery.headers) as { type: string; data: { id: string } }
      assert.equal(payload.type, 'order.created')
      assert.equal(payload.data.id, delivery.id)
    }
    assert.equal(receiving.overlaps, 0)
    assert.equal((await store.webhooks.find(target.id))?.position.toString(), positions.at(-1))
  })

  it("delivers an endpoint subscribed to order.updated alone only the updates, each with its previous values, in the order's order", async () => {
    const receiving = await hook()
    const secret = newSecret()
    const created = await store.webhooks.create({ url: receiving.url, eventTypes: ['order.updated'], description: null, secret }, 100)
    assert.notEqual(created, 'too_many')
    await dispatcher()
    const placed = await store.orders.place({ order: { petId: 1n, quantity: 1, shipDate: null, metadata: { customer: 'c-1' } } })
    assert.ok(placed.outcome === 'placed')
    const id = placed.order.id
    assert.equal((await store.orders.update({ id, patch: { quantity: 2 } })).outcome, 'updated')
    assert.equal((await store.orders.ship(id)).outcome, 'shipped')
    assert.equal((await store.orders.update({ id, patch: { metadata: new Map([['tracking', 'Z1']]) } })).outcome, 'updated')
    assert.equal((await store.orders.complete(id)).outcome, 'completed')
    await within(10_000, 'both updates delivered', () => receiving.deliveries.length >= 2)
    await sleep(300) // nothing more comes
    const payloads = receiving.deliveries.map(
      (delivery) => new Webhook(secret).verify(delivery.body, delivery.headers) as { type: string; data: { order: { version: number; status: string }; previous: unknown } },
    )
    assert.deepEqual(
      payloads.map((payload) => [payload.type, payload.data.order.version, payload.data.order.status, payload.data.previous]),
      [
        ['order.updated', 2, 'pending', { quantity: 1 }],
        ['order.updated', 4, 'shipped', { metadata: { customer: 'c-1' } }],
      ],
    )
  })

  it('waits for its pace before each delivery (a busy instance spaces them)', async () => {
    const receiving = await hook()
    await endpoint(receiving.url)
    const turns: (() => void)[] = []
    await dispatcher({ pace: () => new Promise<void>((resolve) => turns.push(resolve)) })
    const positions = await placeOrders(3)
    for (let i = 0; i < 3; i++) {
      await within(10_000, `delivery ${i + 1} waits for its turn`, () => turns.length === i + 1)
      await sleep(50)
      assert.equal(receiving.deliveries.length, i, 'nothing is sent before its turn')
      turns[i]!()
      await within(10_000, `delivery ${i + 1} sent once its turn came`, () => receiving.deliveries.length === i + 1)
    }
    assert.deepEqual(receiving.deliveries.map((d) => d.id), positions)
  })

  it('sends the next event only after a 2xx, retrying 3xx, 4xx, 5xx, timeouts and resets', async () => {
    const receiving = await hook()
    const target = await endpoint(receiving.url)
    const misbehaviours: Answer[] = [
      (_d, _req, res) => res.writeHead(302, { location: '/elsewhere' }).end(),
      (_d, _req, res) => res.writeHead(400).end(),
      (_d, _req, res) => res.writeHead(500).end(),
      () => {}, // hangs: the 1 s timeout
      (_d, req) => req.socket.destroy(),
    ]
    // The second event fails each way in turn before it is taken. It is told by the order of the
    // ids received: it may arrive before placeOrders has returned its position.
    let secondTries = 0
    const positions: string[] = []
    const seen: string[] = []
    receiving.answer = (delivery, req, res) => {
      if (!seen.includes(delivery.id)) seen.push(delivery.id)
      if (delivery.id === seen[1] && secondTries < misbehaviours.length) misbehaviours[secondTries++]!(delivery, req, res)
      else res.end()
    }
    await dispatcher({ timeoutMs: 1000, retryScheduleMs: [50, 50, 50, 50, 50, 50] })
    positions.push(...(await placeOrders(3)))
    await within(20_000, 'every event delivered', () => receiving.deliveries.filter((d) => d.id === positions[2]).length > 0)
    await sleep(300)
    const second = positions[1]!
    assert.deepEqual(receiving.deliveries.map((d) => d.id), [positions[0], ...Array(6).fill(second), positions[2]])
    assert.ok(receiving.deliveries.every((d) => !d.headers['location']))
    const attempts = await store.webhooks.attempts(target.id, 100)
    assert.deepEqual(
      attempts?.reverse().map((a) => [a.eventId.toString(), a.status, a.error]),
      [
        [positions[0], 200, null],
        [second, 302, 'redirect not followed'],
        [second, 400, 'status 400'],
        [second, 500, 'status 500'],
        [second, null, 'timeout'],
        [second, null, 'connection reset'],
        [second, 200, null],
        [positions[2], 200, null],
      ],
    )
    assert.equal(log.lines.filter((line) => line.message === 'webhook endpoint failing').length, 1, 'one line per failure streak')
    const endpointNow = await store.webhooks.find(target.id)
    assert.equal(endpointNow?.failingSince, null)
    assert.equal(endpointNow?.enabled, true)
  })

  it('waits at least Retry-After after a 429', async () => {
    const receiving = await hook()
    await endpoint(receiving.url)
    let first = true
    receiving.answer = (_d, _req, res) => {
      if (first) res.writeHead(429, { 'retry-after': '2' }).end()
      else res.end()
      first = false
    }
    await dispatcher({ retryScheduleMs: [50] })
    await placeOrders(1)
    await within(15_000, 'the retry', () => receiving.deliveries.length >= 2)
    const [a, b] = receiving.deliveries
    assert.equal(a!.id, b!.id)
    assert.ok(b!.at - a!.at >= 1900, `retried after ${Math.round(b!.at - a!.at)} ms`)
  })

  it('tries a retry at its time: a lease pass is due then, not at the next periodic sweep', async () => {
    const receiving = await hook()
    await endpoint(receiving.url)
    let first = true
    receiving.answer = (_d, _req, res) => {
      if (first) res.writeHead(500).end()
      else res.end()
      first = false
    }
    // The sweep runs once, at start: only the retry's own time can start the second attempt.
    await dispatcher({ retryScheduleMs: [500], sweepIntervalMs: 3_600_000 })
    await placeOrders(1)
    await within(60_000, 'the retry', () => receiving.deliveries.length >= 2)
    const [a, b] = receiving.deliveries
    assert.equal(a!.id, b!.id)
    assert.ok(b!.at - a!.at >= 450, `retried after ${Math.round(b!.at - a!.at)} ms: the schedule's 500 ms −10% at least`)
  })

  it('disables at once on 410', async () => {
    const receiving = await hook()
    const target = await endpoint(receiving.url)
    receiving.answer = (_d, _req, res) => res.writeHead(410).end()
    await dispatcher()
    await placeOrders(2)
    await within(10_000, 'disabled', async () => (await store.webhooks.find(target.id))?.enabled === false)
    await sleep(300)
    assert.equal(receiving.deliveries.length, 1)
    assert.equal((await store.webhooks.find(target.id))?.disabledReason, 'endpoint_gone')
    assert.deepEqual(
      log.lines.filter((line) => line.message === 'webhook endpoint disabled').map((line) => (line.fields as { endpointId: string; reason: string }).reason),
      ['endpoint_gone'],
    )
  })

  it('disables when the schedule runs out, and resumes at the stopped event when enabled again', async () => {
    const receiving = await hook()
    const target = await endpoint(receiving.url)
    receiving.answer = (_d, _req, res) => res.writeHead(503).end()
    await dispatcher({ retryScheduleMs: [50, 50] })
    const positions = await placeOrders(3)
    await within(10_000, 'disabled', async () => (await store.webhooks.find(target.id))?.enabled === false)
    const disabled = await store.webhooks.find(target.id)
    assert.equal(disabled?.disabledReason, 'retries_exhausted')
    assert.deepEqual(receiving.deliveries.map((d) => d.id), [positions[0], positions[0], positions[0]])
    const logged = log.lines.find((line) => line.message === 'webhook endpoint disabled')
    assert.equal((logged?.fields as { endpointId: string }).endpointId, target.id.toString())
    // A plain substring: the secret's base64 may hold '+' or '/', which a RegExp would misread.
    assert.ok(!JSON.stringify(log.lines).includes(target.secret.slice(6, 20)), 'no part of the secret is logged')

    receiving.answer = (_d, _req, res) => res.end()
    await store.webhooks.update(target.id, { enabled: true })
    await within(10_000, 'resumed', () => receiving.deliveries.length >= 6)
    await sleep(300)
    assert.deepEqual(receiving.deliveries.slice(3).map((d) => d.id), positions)
  })

  it('does not let a hanging endpoint delay a healthy one', async () => {
    const hanging = await hook()
    hanging.answer = () => {}
    const healthy = await hook()
    await endpoint(hanging.url)
    await endpoint(healthy.url)
    await dispatcher({ timeoutMs: 30_000 })
    const positions = await placeOrders(20)
    await within(10_000, 'the healthy endpoint served', () => healthy.deliveries.length >= 20)
    assert.deepEqual(healthy.deliveries.map((d) => d.id), positions)
    assert.deepEqual(hanging.deliveries.map((d) => d.id), [positions[0]])
  })

  it('parks an attempt that outlasts its turn: with one slot, a hanging endpoint gives it back and a healthy one is served meanwhile', async () => {
    const hanging = await hook()
    hanging.answer = () => {}
    const healthy = await hook()
    const stuck = await endpoint(hanging.url)
    await endpoint(healthy.url)
    const value = await dispatcher({ timeoutMs: 60_000, maxInFlight: 1, turnMs: 200 })
    const positions = await placeOrders(5)
    await within(30_000, 'the healthy endpoint served', () => healthy.deliveries.length >= 5)
    assert.deepEqual(healthy.deliveries.map((d) => d.id), positions)
    // The hanging attempt is still open (its timeout is a minute away): it held no slot meanwhile.
    assert.deepEqual(hanging.deliveries.map((d) => d.id), [positions[0]])
    assert.deepEqual(await store.webhooks.attempts(stuck.id, 10), [], 'the hanging attempt has not ended')
    // Once the healthy endpoint's loop has released it: the parked attempt keeps its lease, but no slot.
    await within(10_000, 'the healthy loop done', () => value.inFlight === 1)
    assert.equal(value.slotsInUse, 0, 'the parked attempt holds no slot')
    assert.deepEqual(await store.webhooks.attempts(stuck.id, 10), [], 'and it is still open')
  })

  it('erases a previous secret once its signing window is over', async () => {
    const target = await endpoint('http://127.0.0.1:9/unused')
    await store.webhooks.rotateSecret(target.id, newSecret(), new Date(Date.now() + 300))
    const sql = await connectSql(database)
    cleanups.push(() => sql.close())
    const previous = async (): Promise<unknown> =>
      (await sql.query<{ previous_secret: string | null }>(`SELECT previous_secret FROM webhook_endpoints WHERE id = ${target.id}`))[0]!.previous_secret
    assert.notEqual(await previous(), null, 'kept within its window')
    await dispatcher()
    await within(10_000, 'the previous secret erased', async () => (await previous()) === null)
  })

  it('delivers to a healthy endpoint when an event commits: the data version moving starts it, not the periodic sweep', async () => {
    const receiving = await hook()
    await endpoint(receiving.url)
    // The sweep runs once, at start, and not again in this test: only a commit can start a delivery.
    await dispatcher({ sweepIntervalMs: 3_600_000 })
    for (let i = 0; i < 5; i++) {
      const committed = performance.now()
      const [position] = await placeOrders(1)
      // Normally within a second of the commit (the next poll of the data version); not timed.
      await within(30_000, 'delivered', () => receiving.deliveries.some((d) => d.id === position))
      const took = receiving.deliveries.find((d) => d.id === position)!.at - committed
      console.log(`# delivered ${Math.round(took)} ms after its commit`)
    }
  })

  it('aborts an attempt at shutdown and releases its lease', async () => {
    const receiving = await hook()
    receiving.answer = () => {}
    const target = await endpoint(receiving.url)
    const ATTEMPT_TIMEOUT_MS = 60_000
    const first = await dispatcher({ timeoutMs: ATTEMPT_TIMEOUT_MS })
    const [position] = await placeOrders(1)
    await within(10_000, 'the attempt started', () => receiving.deliveries.length === 1)
    const stopped = performance.now()
    await first.stop(200)
    // Aborted after the grace: an attempt left to run would end only at its timeout.
    assert.ok(performance.now() - stopped < ATTEMPT_TIMEOUT_MS, `stopped in ${Math.round(performance.now() - stopped)} ms`)
    assert.equal(first.inFlight, 0)
    // Released: another owner leases it at once, not after the lease (2 min here) expires.
    const leases = await store.webhooks.lease('another', new Date(), 10_000, 10)
    assert.deepEqual(leases.map((lease) => lease.endpoint.id), [target.id])
    assert.equal(leases[0]!.endpoint.position < BigInt(position!), true, 'nothing recorded for the aborted attempt')
    assert.deepEqual(await store.webhooks.attempts(target.id, 10), [])
    await store.webhooks.release(leases[0]!)
  })
})
