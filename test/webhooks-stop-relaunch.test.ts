import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { it } from 'node:test'
import type { WebhookEndpoint, WebhookLease } from '../src/domain/webhooks.js'
import { openStore } from '../src/store/open-store.js'
import type { WebhooksRepository } from '../src/store/webhooks.js'
import { Deliverer } from '../src/webhooks/delivery.js'
import { WebhookDispatcher } from '../src/webhooks/dispatcher.js'
import { createDatabase, within } from './support/harness.js'
import { connectSql } from './support/sql.js'
import { receiver } from './support/webhook-receiver.js'

// The relaunch rule when the dispatcher stops: a lease pass can take an endpoint whose loop is
// still ending its own lease (its release committed, the loop not yet done). That lease is the
// dispatcher's too: stop() must release it before it resolves, not leave it held until it expires
// and keep every other instance from the endpoint meanwhile. The rule is the dispatcher's, not a
// store's: one store (SQLite) serves.

it('a lease taken while its loop was ending is released before stop() resolves, not left to expire', async () => {
  const database = await createDatabase('sqlite')
  const store = await openStore(database.config)
  await store.migrate()
  const sql = await connectSql(database)
  const receiving = await receiver()
  const deliverer = new Deliverer({ timeoutMs: 5000, allowPrivateNetworks: true })
  try {
    const created = await store.webhooks.create(
      { url: receiving.url, eventTypes: ['order.created'], description: null, secret: `whsec_${randomBytes(32).toString('base64')}` },
      100,
    )
    const { id } = created as WebhookEndpoint

    // The first release is committed, then held back from its loop until `open()`.
    let released!: () => void
    const releaseCommitted = new Promise<void>((resolve) => (released = resolve))
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    let releases = 0
    const webhooks = new Proxy(store.webhooks, {
      get(target, property) {
        if (property === 'release') {
          return async (lease: WebhookLease) => {
            await target.release(lease)
            if (++releases > 1) return
            released()
            await gate
          }
        }
        const value = Reflect.get(target, property) as unknown
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
      },
    }) as WebhooksRepository
    const log = { info() {}, warn() {} }
    const dispatcher = new WebhookDispatcher({
      webhooks,
      dataVersion: () => store.orders.dataVersion(),
      deliver: (request, signal) => deliverer.deliver(request, signal),
      timeoutMs: 5000,
      retryScheduleMs: [100],
      log,
      pollIntervalMs: 20,
    })
    const owner = async (): Promise<string | null> =>
      (await sql.query<{ lease_owner: string | null }>(`SELECT lease_owner FROM webhook_endpoints WHERE id = ${id}`))[0]!.lease_owner

    dispatcher.start()
    assert.equal((await store.orders.place({ order: { petId: 1n, quantity: 1, shipDate: null } })).outcome, 'placed')
    await releaseCommitted // delivered, caught up, released: the loop is ending
    assert.equal(receiving.deliveries.length, 1)
    assert.equal(await owner(), null)
    // A new event makes the endpoint due again: the next lease pass takes it while the loop ends.
    assert.equal((await store.orders.place({ order: { petId: 1n, quantity: 1, shipDate: null } })).outcome, 'placed')
    await within(15_000, 'the next lease pass takes the endpoint', async () => (await owner()) === dispatcher.owner)

    const stopped = dispatcher.stop(5000)
    open()
    await stopped
    assert.equal(await owner(), null, 'no lease of the stopped dispatcher is left to expire')
    const next = await store.webhooks.lease('another instance', new Date(), 30_000, 10)
    assert.deepEqual(
      next.map((lease) => lease.endpoint.id),
      [id],
      'another instance leases the endpoint at once',
    )
  } finally {
    deliverer.close()
    await receiving.close()
    await sql.close()
    await store.close()
    await database.dispose()
  }
})
