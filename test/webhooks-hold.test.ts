import assert from 'node:assert/strict'
import type { ServerResponse } from 'node:http'
import { after, afterEach, before, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Webhook } from 'standardwebhooks'
import { generateApiKey } from '../src/domain/api-keys.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, forEachStore, within, type TestDatabaseHandle } from './support/harness.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'
import { receiver, type Receiver } from './support/webhook-receiver.js'

// Webhooks against the peers they meet: an endpoint changed while its backlog is delivered, and
// receivers that trickle their answer or never give one. Each runs against a real `serve` process
// on each store, changed through the API, delivering to real receivers on 127.0.0.1.

const RECEIVER_DELAY_MS = 10

interface WireEndpoint {
  id: string
  secret: string
}

forEachStore('webhooks that hold', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let server: ServerProcess
  let key: string
  const receivers: Receiver[] = []

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    const generated = generateApiKey()
    await store.apiKeys.create({ name: 'hold', hash: generated.hash, displayPrefix: generated.displayPrefix, scopes: ['orders:read', 'webhooks:manage'], expiresAt: null })
    key = generated.secret
    server = await spawnServer(database.url, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms' })
  })
  after(async () => {
    server.child.kill('SIGTERM')
    await server.exited
    await store.close()
    await database.dispose()
  })
  afterEach(async () => {
    for (const endpoint of await store.webhooks.list()) await store.webhooks.remove(endpoint.id)
    for (const receiving of receivers.splice(0)) await receiving.close()
  })

  async function api(method: string, path: string, body?: object): Promise<{ status: number; text: string }> {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` }
    if (body !== undefined) headers['content-type'] = 'application/json'
    const response = await fetch(`${server.origin}/v2/webhook-endpoints${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    return { status: response.status, text: await response.text() }
  }

  /** A receiver that answers 200 after RECEIVER_DELAY_MS, so a backlog takes a while to deliver. */
  async function slowReceiver(): Promise<Receiver> {
    const receiving = await receiver()
    receiving.answer = (_delivery, _req, res) => void setTimeout(() => res.end(), RECEIVER_DELAY_MS)
    receivers.push(receiving)
    return receiving
  }

  async function createEndpoint(url: string, eventTypes?: string[]): Promise<WireEndpoint> {
    const created = await api('POST', '', { url, ...(eventTypes === undefined ? {} : { eventTypes }) })
    assert.equal(created.status, 201, created.text)
    const { secret } = JSON.parse(created.text) as { secret: string }
    // The id as the text sent (an int64, never through a number).
    return { id: /"id":"?(\d+)/.exec(created.text)![1]!, secret }
  }

  /** Places `count` orders; their order.created events' ids, ascending. */
  async function placeOrders(count: number): Promise<string[]> {
    const head = (await store.events.read(undefined, 100_000)).next
    for (let i = 0; i < count; i++) assert.equal((await store.orders.place({ order: { petId: 5n, quantity: 1, shipDate: null } })).outcome, 'placed')
    const page = await store.events.read(head, 100_000)
    return [...page.json.toString().matchAll(/"id":"(\d+)","type":"order.created"/g)].map((match) => match[1]!)
  }

  /** The delivered ids in arrival order, a retry of the same event (at least once) counted once. */
  function uniqueInOrder(ids: string[]): string[] {
    return ids.filter((id, i) => i === 0 || id !== ids[i - 1])
  }

  it('a PATCH of url mid-backlog: the old URL gets at most the delivery in flight, the new one the rest, none skipped or reordered', async () => {
    const [before, moved] = [await slowReceiver(), await slowReceiver()]
    const endpoint = await createEndpoint(before.url)
    const events = await placeOrders(60)
    await within(30_000, 'a few deliveries to the first URL', () => before.deliveries.length >= 5)
    const patched = await api('PATCH', `/${endpoint.id}`, { url: moved.url })
    assert.equal(patched.status, 200, patched.text)
    const oldAtAnswer = before.deliveries.length
    await within(60_000, 'the rest at the new URL', () => uniqueInOrder([...before.deliveries, ...moved.deliveries].map((d) => d.id)).length >= events.length)
    assert.ok(before.deliveries.length <= oldAtAnswer + 1, `${before.deliveries.length - oldAtAnswer} deliveries went to the old URL after the PATCH was answered`)
    assert.ok(moved.deliveries.length > 0)
    const received = uniqueInOrder([...before.deliveries, ...moved.deliveries].map((d) => d.id))
    assert.deepEqual(received, events, 'every event once, in feed order, across the change')
  })

  it('rotate-secret mid-backlog: every delivery after the one in flight verifies with the new secret', async () => {
    const receiving = await slowReceiver()
    const endpoint = await createEndpoint(receiving.url)
    const events = await placeOrders(40)
    await within(30_000, 'a few deliveries', () => receiving.deliveries.length >= 5)
    const rotated = await api('POST', `/${endpoint.id}/rotate-secret`)
    assert.equal(rotated.status, 200, rotated.text)
    const atAnswer = receiving.deliveries.length
    const { secret } = JSON.parse(rotated.text) as { secret: string }
    await within(60_000, 'the rest of the backlog', () => uniqueInOrder(receiving.deliveries.map((d) => d.id)).length >= events.length)
    const verifier = new Webhook(secret)
    const refused = receiving.deliveries.slice(atAnswer).filter((delivery) => {
      try {
        verifier.verify(delivery.body, delivery.headers)
        return false
      } catch {
        return true
      }
    })
    assert.ok(refused.length <= 1, `${refused.length} deliveries after the rotation did not verify with the new secret`)
    assert.deepEqual(uniqueInOrder(receiving.deliveries.map((d) => d.id)), events)
  })

  for (const change of ['disable', 'delete', 'types'] as const) {
    it(`${change === 'types' ? 'a PATCH of eventTypes' : change === 'disable' ? 'enabled: false' : 'DELETE'} mid-backlog: at most the delivery in flight follows`, async () => {
      const receiving = await slowReceiver()
      const endpoint = await createEndpoint(receiving.url, ['order.created', 'order.cancelled'])
      const events = await placeOrders(60)
      await within(30_000, 'a few deliveries', () => receiving.deliveries.length >= 5)
      const answer =
        change === 'disable'
          ? await api('PATCH', `/${endpoint.id}`, { enabled: false })
          : change === 'delete'
            ? await api('DELETE', `/${endpoint.id}`)
            : await api('PATCH', `/${endpoint.id}`, { eventTypes: ['order.cancelled'] })
      assert.equal(answer.status, change === 'delete' ? 204 : 200, answer.text)
      const atAnswer = receiving.deliveries.length
      // Long enough for several more deliveries at the receiver's pace, had they gone on.
      await sleep(40 * RECEIVER_DELAY_MS)
      assert.ok(receiving.deliveries.length <= atAnswer + 1, `${receiving.deliveries.length - atAnswer} deliveries after the change was answered`)
      assert.ok(atAnswer < events.length, 'the change came mid-backlog')
      const received = uniqueInOrder(receiving.deliveries.map((d) => d.id))
      assert.deepEqual(received, events.slice(0, received.length), 'what was delivered is a prefix of the feed')
      if (change === 'types') {
        // The new types hold from the next delivery: a cancellation is sent, the created events are not.
        const placed = await store.orders.place({ order: { petId: 5n, quantity: 1, shipDate: null } })
        assert.ok(placed.outcome === 'placed')
        assert.equal((await store.orders.cancel(placed.order.id, null)).outcome, 'cancelled')
        await within(30_000, 'the cancellation', () => receiving.deliveries.some((delivery) => delivery.body.includes('"type":"order.cancelled"')))
        const after = receiving.deliveries.slice(atAnswer + 1)
        assert.ok(after.every((delivery) => delivery.body.includes('"type":"order.cancelled"')), 'only the new types after the change')
      }
    })
  }
})

/** Answers 200 at once, then a byte of body every half second, without end. */
function trickle(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/plain' })
  res.write('.')
  const timer = setInterval(() => res.write('.'), 500)
  res.on('close', () => clearInterval(timer))
}

forEachStore('webhooks against receivers that trickle or hang', (kind) => {
  // A hanging attempt would hold its slot for the whole timeout (a minute here) were the slot not
  // given back after a turn; a trickling receiver's, until the timeout too, were its body awaited.
  const timeoutMs = 60_000
  const scenarios: { title: string; trickling: number; hanging: number; env: Record<string, string> }[] = [
    { title: '40 trickling and 40 hanging endpoints, default slots', trickling: 40, hanging: 40, env: {} },
    { title: '12 trickling and 12 hanging endpoints, 8 slots', trickling: 12, hanging: 12, env: { WEBHOOK_CONCURRENCY: '8' } },
  ]

  for (const scenario of scenarios) {
    it(`${scenario.title}: a healthy endpoint gets every event, none after a timeout`, async () => {
      const database = await createDatabase(kind)
      const store = await openStore(database.config)
      const receivers: Receiver[] = []
      const processes: ServerProcess[] = []
      try {
        await store.migrate()
        const endpoint = async (answer: Receiver['answer']): Promise<Receiver> => {
          const receiving = await receiver()
          receiving.answer = answer
          receivers.push(receiving)
          const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
          assert.notEqual(await store.webhooks.create({ url: receiving.url, eventTypes: ['order.created'], description: null, secret }, 1000), 'too_many')
          return receiving
        }
        const trickling: Receiver[] = []
        for (let i = 0; i < scenario.trickling; i++) trickling.push(await endpoint((_delivery, _req, res) => trickle(res)))
        for (let i = 0; i < scenario.hanging; i++) await endpoint(() => {}) // never answers
        const healthy = await endpoint((_delivery, _req, res) => res.end())
        // On PostgreSQL two instances share the endpoints.
        for (let i = 0; i < (kind === 'postgres' ? 2 : 1); i++) {
          processes.push(
            await spawnServer(database.url, {
              WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
              WEBHOOK_TIMEOUT_MS: String(timeoutMs),
              WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms',
              ...scenario.env,
            }),
          )
        }
        const latencies: number[] = []
        for (let i = 0; i < 15; i++) {
          const placed = performance.now()
          assert.equal((await store.orders.place({ order: { petId: 6n, quantity: 1, shipDate: null } })).outcome, 'placed')
          await within(timeoutMs - 5000, `event ${i + 1} at the healthy endpoint`, () => healthy.deliveries.length > i)
          latencies.push(healthy.deliveries[i]!.at - placed)
        }
        // The rule: no attempt holds a slot past its turn, so no healthy delivery waits out a timeout.
        assert.ok(Math.max(...latencies) < timeoutMs, `latencies ${latencies.map(Math.round).join(', ')} ms`)
        assert.equal(new Set(healthy.deliveries.map((d) => d.id)).size, 15, 'each event once')
        // A trickled 200 is a success: each trickling receiver is sent its next event (not after a
        // timeout: the minute is far off), and the attempt is recorded as a 200.
        await within(timeoutMs - 5000, 'a second event at every trickling receiver', () => trickling.every((receiving) => receiving.deliveries.length > 1))
        const first = (await store.webhooks.list())[0]!
        const attempts = await store.webhooks.attempts(first.id, 100)
        assert.ok(attempts!.some((attempt) => attempt.status === 200 && attempt.error === null), 'a trickled 200 is recorded as a success')
      } finally {
        for (const child of processes) {
          child.child.kill('SIGTERM')
          await child.exited
        }
        for (const receiving of receivers) await receiving.close()
        await store.close()
        await database.dispose()
      }
    })
  }
})
