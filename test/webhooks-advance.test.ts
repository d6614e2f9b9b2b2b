import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, it } from 'node:test'
import Database from 'better-sqlite3'
import { openStore } from '../src/store/open-store.js'
import { StoreUnavailableError, type Store } from '../src/store/store.js'
import type { WebhookAttempt, WebhookEndpoint, WebhookLease } from '../src/domain/webhooks.js'
import { createDatabase, forEachStore, type TestDatabaseHandle } from './support/harness.js'

// Advances of several endpoints made at once (the dispatcher's loops whose 2xx came together): on
// SQLite they share one commit, and each must still be conditional on its own lease.

const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`

function attempt(eventId: bigint): WebhookAttempt {
  return { eventId, attemptedAt: new Date().toISOString(), status: 200, error: null, durationMs: 1 }
}

forEachStore('webhook advances at once', (kind) => {
  let database: TestDatabaseHandle
  let store: Store

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config, { busyTimeoutMs: 50 })
    await store.migrate()
  })
  after(async () => {
    await store.close()
    await database.dispose()
  })

  /** `count` endpoints at the head, then one placed order: the event each is behind; all of them leased. */
  async function leasedEndpoints(count: number): Promise<{ leases: WebhookLease[]; event: bigint }> {
    for (const endpoint of await store.webhooks.list()) await store.webhooks.remove(endpoint.id)
    const created: WebhookEndpoint[] = []
    for (let i = 0; i < count; i++) {
      const endpoint = await store.webhooks.create({ url: `http://127.0.0.1:9/hook/${i}`, eventTypes: ['order.created'], description: null, secret: newSecret() }, 100)
      assert.notEqual(endpoint, 'too_many')
      created.push(endpoint as WebhookEndpoint)
    }
    assert.equal((await store.orders.place({ order: { petId: 1n, quantity: 1, shipDate: null } })).outcome, 'placed')
    const leases = await store.webhooks.lease('owner-a', new Date(), 60_000, 100)
    assert.deepEqual(leases.map((lease) => lease.endpoint.id), created.map((endpoint) => endpoint.id))
    const next = await store.webhooks.next(leases[0]!, 10)
    assert.notEqual(next, 'expired')
    if (next === 'expired') throw new Error('unreachable')
    assert.equal(next.events.length, 1)
    return { leases, event: next.events[0]!.position }
  }

  it('moves each endpoint whose lease holds, and not one whose lease was lost', async () => {
    const { leases, event } = await leasedEndpoints(3)
    const before = leases[2]!.endpoint.position
    // The third's lease as another owner would hold it: this owner's write must change nothing.
    const lost: WebhookLease = { ...leases[2]!, endpoint: { ...leases[2]!.endpoint }, owner: 'owner-b' }
    const results = await Promise.all([
      store.webhooks.advance(leases[0]!, event, attempt(event)),
      store.webhooks.advance(leases[1]!, event, attempt(event)),
      store.webhooks.advance(lost, event, attempt(event)),
    ])
    assert.deepEqual(results, [true, true, false])
    const stored = await Promise.all(leases.map((lease) => store.webhooks.find(lease.endpoint.id)))
    assert.deepEqual(stored.map((endpoint) => endpoint!.position), [event, event, before])
    assert.deepEqual([leases[0]!.endpoint.position, leases[1]!.endpoint.position, lost.endpoint.position], [event, event, before])
    const attempts = await Promise.all(leases.map((lease) => store.webhooks.attempts(lease.endpoint.id, 10)))
    assert.deepEqual(attempts.map((list) => list!.map((a) => a.eventId)), [[event], [event], []])
  })

  if (kind === 'sqlite') {
    it('fails every advance of a commit that fails, writing none, and advances once the store is free', async () => {
      const { leases, event } = await leasedEndpoints(2)
      const before = leases[0]!.endpoint.position
      // Another process holds the write lock past the store's busy timeout.
      const other = new Database(database.config.kind === 'sqlite' ? database.config.path : '')
      other.exec('BEGIN IMMEDIATE')
      try {
        const results = await Promise.allSettled(leases.map((lease) => store.webhooks.advance(lease, event, attempt(event))))
        for (const result of results) {
          assert.equal(result.status, 'rejected')
          assert.ok((result as PromiseRejectedResult).reason instanceof StoreUnavailableError)
        }
      } finally {
        other.exec('ROLLBACK')
        other.close()
      }
      const stored = await Promise.all(leases.map((lease) => store.webhooks.find(lease.endpoint.id)))
      assert.deepEqual(stored.map((endpoint) => endpoint!.position), [before, before])
      assert.deepEqual(leases.map((lease) => lease.endpoint.position), [before, before])
      assert.deepEqual(await Promise.all(leases.map((lease) => store.webhooks.advance(lease, event, attempt(event)))), [true, true])
      const moved = await Promise.all(leases.map((lease) => store.webhooks.find(lease.endpoint.id)))
      assert.deepEqual(moved.map((endpoint) => endpoint!.position), [event, event])
    })
  }
})
