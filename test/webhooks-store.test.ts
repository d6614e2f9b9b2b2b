import assert from 'node:assert/strict'
import { it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { OrderRecord } from '../src/domain/orders.js'
import { EventsExpiredError, ORDER_EVENT_TYPES, UnknownEventPositionError, type OrderEventType } from '../src/domain/order-events.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import type { NextEvents, WebhookAttempt, WebhookEndpoint, WebhookLease } from '../src/domain/webhooks.js'
import { createDatabase, forEachStore, type StoreKind, type TestDatabaseHandle } from './support/harness.js'
import { connectSql, type Sql } from './support/sql.js'

// The webhooks' side of both stores, on real databases: endpoints start at the feed's head, leases
// hand each endpoint to one dispatcher at a time across store instances, and every write under a
// lease changes nothing once the lease is lost.

const LEASE_MS = 30_000

function order(id: bigint, fields: Partial<OrderRecord> = {}): OrderRecord {
  return { id, petId: 7n, quantity: 1, shipDate: '2026-11-25T10:00:00.000Z', complete: false, status: 'pending', ...fields }
}

async function* from<T>(items: Iterable<T>): AsyncIterable<T> {
  yield* items
}

/** Orders `first`…`first + count - 1`, imported: one order.created event each, in id order. */
async function addOrders(store: Store, first: bigint, count: number): Promise<void> {
  await store.orders.import(from(Array.from({ length: count }, (_, i) => order(first + BigInt(i)))))
}

function newEndpoint(types: OrderEventType[] = [...ORDER_EVENT_TYPES], url = 'https://hooks.example/petstore') {
  return { url, eventTypes: types, description: null, secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}` }
}

async function create(store: Store, types?: OrderEventType[], max = 100): Promise<WebhookEndpoint> {
  const created = await store.webhooks.create(newEndpoint(types), max)
  assert.notEqual(created, 'too_many')
  return created as WebhookEndpoint
}

/** The newest position of the feed (the cursor an empty read from it resumes at). */
async function head(store: Store): Promise<bigint> {
  let cursor: bigint | undefined
  for (;;) {
    const page = await store.events.read(cursor, 1000)
    if (page.count === 0) return page.next
    cursor = page.next
  }
}

function attempt(eventId: bigint, fields: Partial<WebhookAttempt> = {}): WebhookAttempt {
  return { eventId, attemptedAt: new Date().toISOString(), status: 200, error: null, durationMs: 12, ...fields }
}

function events(next: NextEvents): { events: { position: bigint; type: string }[]; through: bigint } {
  assert.notEqual(next, 'expired')
  if (next === 'expired') throw new Error('unreachable')
  return { events: next.events.map(({ position, type }) => ({ position, type })), through: next.through }
}

/** The one lease `owner` gets now (asserting there is exactly one). */
async function leaseOne(store: Store, owner: string, now = new Date()): Promise<WebhookLease> {
  const leases = await store.webhooks.lease(owner, now, LEASE_MS, 10)
  assert.equal(leases.length, 1, `${owner} leases one endpoint`)
  return leases[0]!
}

/** A fresh migrated database with `count` stores open on it (two: as two instances would be). */
async function withStores(kind: StoreKind, count: number, work: (stores: Store[], sql: Sql, database: TestDatabaseHandle) => Promise<void>): Promise<void> {
  const database = await createDatabase(kind)
  const stores: Store[] = []
  let sql: Sql | undefined
  try {
    for (let i = 0; i < count; i++) stores.push(await openStore(database.config))
    await stores[0]!.migrate()
    sql = await connectSql(database)
    await work(stores, sql, database)
  } finally {
    await Promise.all(stores.map((store) => store.close()))
    await sql?.close()
    await database.dispose()
  }
}

forEachStore('webhooks store', (kind) => {
  it('an advance queued when the store closes is committed before its connection closes', async () => {
    await withStores(kind, 2, async ([store, other]) => {
      const endpoint = await create(store!)
      await addOrders(store!, 1n, 2)
      const lease = await leaseOne(store!, 'closing')
      const target = endpoint.position + 1n
      const advanced = store!.webhooks.advance(lease, target, attempt(target))
      await store!.close()
      assert.equal(await advanced, true)
      assert.equal((await other!.webhooks.find(endpoint.id))!.position, target)
    })
  })

  it('creates an endpoint at the head of the feed: an event committed before is not sent, one after is', async () => {
    await withStores(kind, 1, async ([store]) => {
      await addOrders(store!, 1n, 3)
      const endpoint = await create(store!)
      assert.equal(endpoint.position, await head(store!))
      assert.equal(typeof endpoint.id, 'bigint')
      assert.deepEqual(
        { ...endpoint, id: 0n, createdAt: '' },
        {
          id: 0n,
          url: 'https://hooks.example/petstore',
          eventTypes: [...ORDER_EVENT_TYPES],
          description: null,
          enabled: true,
          disabledReason: null,
          position: endpoint.position,
          failingSince: null,
          nextAttemptAt: null,
          createdAt: '',
        },
      )
      assert.ok(Math.abs(Date.parse(endpoint.createdAt) - Date.now()) < 60_000)
      assert.deepEqual(await store!.webhooks.find(endpoint.id), endpoint)
      assert.deepEqual(await store!.webhooks.list(), [endpoint])

      assert.deepEqual(await store!.webhooks.lease('a', new Date(), LEASE_MS, 10), [], 'nothing after its position: not leased')
      await store!.orders.cancel(2n, null)
      const lease = await leaseOne(store!, 'a')
      const next = events(await store!.webhooks.next(lease, 10))
      assert.deepEqual(
        next.events.map((e) => e.type),
        ['order.cancelled'],
      )
      assert.ok(next.events[0]!.position > endpoint.position)
    })
  })

  it('starts at the newest position retention deleted when no event is left', async () => {
    await withStores(kind, 1, async ([store]) => {
      await addOrders(store!, 1n, 3)
      const newest = await head(store!)
      assert.equal(await store!.events.prune(new Date(Date.now() + 60_000)), 3)
      const endpoint = await create(store!)
      assert.equal(endpoint.position, newest)
      assert.deepEqual(await store!.webhooks.lease('a', new Date(), LEASE_MS, 10), [], 'at the head: not leased')
    })
  })

  it('with writes running alongside, an endpoint is sent every event committed after its create, none committed before', async () => {
    await withStores(kind, 1, async ([store]) => {
      await addOrders(store!, 1n, 60)
      const positions: bigint[] = [] // of the endpoints created so far, in order
      const cancels: { id: bigint; createdBefore: number; startedBefore: number }[] = []
      let creating = 0 // creates started so far
      const writes = (async () => {
        for (let id = 1n; id <= 60n; id++) {
          const cancel = { id, createdBefore: positions.length, startedBefore: Infinity }
          await store!.orders.cancel(id, null)
          cancel.startedBefore = creating // every create started from here on began after this event committed
          cancels.push(cancel)
        }
      })()
      for (let i = 0; i < 15; i++) {
        creating++
        positions.push((await create(store!)).position)
        await sleep(2)
      }
      await writes
      const feed = JSON.parse((await store!.events.read(0n, 1000)).json.toString()) as { id: string; type: string; order: { id: number } }[]
      for (const cancel of cancels) {
        const event = BigInt(feed.find((e) => e.type === 'order.cancelled' && BigInt(e.order.id) === cancel.id)!.id)
        for (let j = 0; j < cancel.createdBefore; j++) {
          assert.ok(event > positions[j]!, `the cancel of ${cancel.id}, started after endpoint ${j} was created, is after its position`)
        }
        for (let j = cancel.startedBefore; j < positions.length; j++) {
          assert.ok(event <= positions[j]!, `the cancel of ${cancel.id}, committed before endpoint ${j} was created, is not after its position`)
        }
      }
    })
  })

  it('refuses an endpoint beyond the cap, counting in the creating transaction, and writes nothing', async () => {
    await withStores(kind, 2, async ([first, second]) => {
      await create(first!, undefined, 3)
      await create(second!, undefined, 3)
      // Two instances race for the last slot: exactly one gets it.
      const raced = await Promise.all([
        first!.webhooks.create(newEndpoint(), 3),
        second!.webhooks.create(newEndpoint(), 3),
        first!.webhooks.create(newEndpoint(), 3),
        second!.webhooks.create(newEndpoint(), 3),
      ])
      assert.equal(raced.filter((r) => r !== 'too_many').length, 1)
      assert.equal(await first!.webhooks.create(newEndpoint(), 3), 'too_many')
      assert.equal((await second!.webhooks.list()).length, 3)
      // Removing one frees a slot; ids are never given out again.
      const ids = (await first!.webhooks.list()).map((e) => e.id)
      assert.equal(await first!.webhooks.remove(ids.at(-1)!), true)
      const replacement = await create(second!, undefined, 3)
      assert.ok(replacement.id > ids.at(-1)!, 'a new id, above every id given out')
    })
  })

  it('lets many concurrent creates take exactly the free slots', async () => {
    await withStores(kind, 2, async (stores) => {
      const results = await Promise.all(Array.from({ length: 16 }, (_, i) => stores[i % 2]!.webhooks.create(newEndpoint(), 5)))
      assert.equal(results.filter((r) => r !== 'too_many').length, 5)
      assert.equal((await stores[0]!.webhooks.list()).length, 5)
    })
  })

  it('leases each endpoint to one owner at a time across two store instances, and hands an expired lease over', async () => {
    await withStores(kind, 2, async ([a, b], sql) => {
      const endpoints = []
      for (let i = 0; i < 6; i++) endpoints.push(await create(a!))
      await addOrders(a!, 1n, 2)

      const [leasedA, leasedB] = await Promise.all([a!.webhooks.lease('a', new Date(), LEASE_MS, 4), b!.webhooks.lease('b', new Date(), LEASE_MS, 4)])
      const idsA = leasedA.map((l) => l.endpoint.id)
      const idsB = leasedB.map((l) => l.endpoint.id)
      assert.deepEqual(
        idsA.filter((id) => idsB.includes(id)),
        [],
        'no endpoint is held by both',
      )
      assert.equal(idsA.length + idsB.length, 6, 'every endpoint is leased by one of them')
      assert.ok(idsA.length <= 4 && idsB.length <= 4, 'at most the limit each')
      for (const lease of [...leasedA, ...leasedB]) {
        assert.equal(lease.failures, 0)
        assert.equal(lease.secrets.current, newEndpoint().secret)
        assert.equal(lease.secrets.previous, null)
      }
      assert.deepEqual(await a!.webhooks.lease('a', new Date(), LEASE_MS, 10), [], 'held leases are not leased again, even to their owner')
      assert.deepEqual(await b!.webhooks.lease('b', new Date(), LEASE_MS, 10), [])

      // a's holder crashed: once its lease has expired, b takes its endpoints over.
      const later = new Date(Date.now() + LEASE_MS + 1000)
      const takenOver = await b!.webhooks.lease('b2', later, LEASE_MS, 10)
      assert.deepEqual(
        takenOver.map((l) => l.endpoint.id),
        endpoints.map((e) => e.id),
        'every lease expired by then (b\'s own too)',
      )
      const old = leasedA[0]!
      const events = await a!.webhooks.next(old, 10)
      assert.notEqual(events, 'expired')
      const first = (events as { events: { position: bigint }[] }).events[0]!.position
      assert.equal(await a!.webhooks.advance(old, first, attempt(first)), false, 'the old owner advances nothing')
      assert.equal(await a!.webhooks.fail(old, attempt(first, { status: 500 }), { retryAt: new Date(Date.now() + 5000) }), false)
      assert.equal(await a!.webhooks.fail(old, attempt(first, { status: 410 }), { disable: 'endpoint_gone' }), false)
      assert.equal(await a!.webhooks.disable(old, 'events_expired'), false)
      const oldUntil = old.leaseUntil
      assert.equal(await a!.webhooks.renew(old, new Date(), LEASE_MS), false)
      assert.equal(old.leaseUntil, oldUntil, 'a renewal that was not written leaves the lease as it was')
      await a!.webhooks.release(old) // no-op: b2 holds it
      const found = await b!.webhooks.find(old.endpoint.id)
      assert.deepEqual(found, old.endpoint, 'nothing written by the old owner')
      assert.deepEqual(await b!.webhooks.attempts(old.endpoint.id, 100), [])
      const rows = await sql.query<{ lease_owner: string }>(`SELECT lease_owner FROM webhook_endpoints WHERE id = ${old.endpoint.id}`)
      assert.equal(rows[0]!.lease_owner, 'b2', 'the new owner still holds it')

      // The new owner's writes count.
      const current = takenOver.find((l) => l.endpoint.id === old.endpoint.id)!
      const renewedAt = new Date()
      assert.equal(await b!.webhooks.renew(current, renewedAt, LEASE_MS), true)
      assert.deepEqual(current.leaseUntil, new Date(renewedAt.getTime() + LEASE_MS), 'the lease holds until the renewal\'s end')
      assert.equal(await b!.webhooks.advance(current, first, attempt(first)), true)
      assert.equal((await b!.webhooks.find(old.endpoint.id))!.position, first)
    })
  })

  it('never gives one endpoint to two owners when they lease at the same moment, round after round', async () => {
    await withStores(kind, 2, async (stores) => {
      for (let i = 0; i < 8; i++) await create(stores[0]!)
      await addOrders(stores[0]!, 1n, 1)
      for (let round = 0; round < 30; round++) {
        const owners = ['a', 'b', 'c', 'd']
        const leases = await Promise.all(owners.map((owner, i) => stores[i % 2]!.webhooks.lease(`${owner}${round}`, new Date(), LEASE_MS, 8)))
        const ids = leases.flat().map((lease) => lease.endpoint.id)
        assert.equal(new Set(ids).size, ids.length, `round ${round}: no endpoint leased twice`)
        assert.equal(ids.length, 8, `round ${round}: every endpoint leased`)
        await Promise.all(leases.flat().map((lease) => stores[0]!.webhooks.release(lease)))
      }
    })
  })

  it('a lease that expired without being taken writes nothing; release frees an endpoint at once', async () => {
    await withStores(kind, 1, async ([store]) => {
      const endpoint = await create(store!)
      await addOrders(store!, 1n, 1)
      const short = (await store!.webhooks.lease('a', new Date(), 50, 10))[0]!
      await sleep(200)
      assert.equal(await store!.webhooks.advance(short, short.endpoint.position + 1n, null), false)
      assert.equal(await store!.webhooks.renew(short, new Date(), LEASE_MS), false)
      assert.equal((await store!.webhooks.find(endpoint.id))!.position, endpoint.position)

      const lease = await leaseOne(store!, 'b')
      assert.deepEqual(await store!.webhooks.lease('c', new Date(), LEASE_MS, 10), [])
      await store!.webhooks.release(lease)
      assert.equal((await leaseOne(store!, 'c')).endpoint.id, endpoint.id)
    })
  })

  it('does not lease an endpoint that is disabled, waiting for its retry, or at the head', async () => {
    await withStores(kind, 1, async ([store]) => {
      const disabled = await create(store!)
      const waiting = await create(store!)
      await addOrders(store!, 1n, 2)
      await create(store!) // at the head
      await store!.webhooks.update(disabled.id, { enabled: false })
      const lease = await leaseOne(store!, 'a')
      assert.equal(lease.endpoint.id, waiting.id)
      const retryAt = new Date(Date.now() + 60_000)
      assert.equal(await store!.webhooks.fail(lease, attempt(lease.endpoint.position + 1n, { status: 503 }), { retryAt }), true)
      assert.deepEqual(await store!.webhooks.lease('a', new Date(), LEASE_MS, 10), [], 'the failed one waits for its retry')
      const due = await store!.webhooks.lease('a', new Date(retryAt.getTime() + 1), LEASE_MS, 10)
      assert.deepEqual(
        due.map((l) => [l.endpoint.id, l.failures]),
        [[waiting.id, 1]],
      )
    })
  })

  it('next: the events of the lease\'s types after its position, and how far it read', async () => {
    await withStores(kind, 1, async ([store]) => {
      const shipped = await create(store!, ['order.shipped', 'order.cancelled'])
      const all = await create(store!)
      await addOrders(store!, 1n, 4) // created ×4
      await store!.orders.ship(1n)
      await store!.orders.cancel(2n, null)
      await addOrders(store!, 5n, 2) // created ×2
      const base = shipped.position
      const leases = await store!.webhooks.lease('a', new Date(), LEASE_MS, 10)
      const lease = leases.find((l) => l.endpoint.id === shipped.id)!
      assert.deepEqual(lease.endpoint.eventTypes, ['order.shipped', 'order.cancelled'])

      const wide = events(await store!.webhooks.next(lease, 10))
      assert.deepEqual(wide.events, [
        { position: base + 5n, type: 'order.shipped' },
        { position: base + 6n, type: 'order.cancelled' },
      ])
      assert.equal(wide.through, base + 8n, 'every event scanned, matching or not')
      const narrow = events(await store!.webhooks.next(lease, 1))
      assert.deepEqual(narrow.events, [{ position: base + 5n, type: 'order.shipped' }])
      assert.equal(narrow.through, base + 5n, 'a full page stops at its last event')

      // The JSON exactly as the feed shows it.
      const page = (await store!.events.read(base, 100)).json.toString()
      const next = await store!.webhooks.next(lease, 10)
      assert.notEqual(next, 'expired')
      for (const event of (next as Exclude<NextEvents, 'expired'>).events) {
        assert.ok(page.includes(event.json), `event ${event.position} as the feed writes it`)
        const parsed = JSON.parse(event.json) as { id: string; type: string; occurredAt: string }
        assert.deepEqual([parsed.id, parsed.type, parsed.occurredAt], [String(event.position), event.type, event.occurredAt])
      }

      // Advancing moves the lease's position too: next reads on from there.
      assert.equal(await store!.webhooks.advance(lease, base + 5n, attempt(base + 5n)), true)
      assert.equal(lease.endpoint.position, base + 5n)
      assert.deepEqual(events(await store!.webhooks.next(lease, 10)).events, [{ position: base + 6n, type: 'order.cancelled' }])
      assert.equal(await store!.webhooks.advance(lease, base + 8n, null), true, 'nothing of its types up to the end')
      assert.deepEqual(events(await store!.webhooks.next(lease, 10)), { events: [], through: base + 8n })
      assert.deepEqual(
        (await store!.webhooks.attempts(shipped.id, 10))!.map((a) => a.eventId),
        [base + 5n],
        'advancing without an attempt records none',
      )

      const every = leases.find((l) => l.endpoint.id === all.id)!
      assert.deepEqual(
        events(await store!.webhooks.next(every, 100)).events.map((e) => e.position),
        [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n].map((p) => base + p),
      )
    })
  })

  it('next looks at a bounded run of events, so a rare type moves through a long run of others in steps', async () => {
    await withStores(kind, 1, async ([store]) => {
      const rare = await create(store!, ['order.completed'])
      await addOrders(store!, 1n, 2500)
      const lease = await leaseOne(store!, 'a')
      const first = events(await store!.webhooks.next(lease, 10))
      assert.deepEqual(first.events, [])
      assert.ok(first.through > rare.position && first.through < rare.position + 2500n, `a step: ${first.through}`)
      let through = first.through
      for (let step = 0; step < 10 && through < rare.position + 2500n; step++) {
        assert.equal(await store!.webhooks.advance(lease, through, null), true)
        through = events(await store!.webhooks.next(lease, 10)).through
      }
      assert.equal(through, rare.position + 2500n, 'through the end in a few steps')
    })
  })

  it("next is 'expired' once retention deleted events after the position; disable then stops the endpoint", async () => {
    await withStores(kind, 1, async ([store]) => {
      const endpoint = await create(store!)
      await addOrders(store!, 1n, 3)
      await store!.events.prune(new Date(Date.now() + 60_000), 2)
      const lease = await leaseOne(store!, 'a')
      assert.equal(await store!.webhooks.next(lease, 10), 'expired')
      assert.equal(await store!.webhooks.disable(lease, 'events_expired'), true)
      const disabled = await store!.webhooks.find(endpoint.id)
      assert.deepEqual(
        [disabled!.enabled, disabled!.disabledReason, disabled!.position],
        [false, 'events_expired', endpoint.position],
      )
      assert.deepEqual(await store!.webhooks.lease('b', new Date(), LEASE_MS, 10), [])
      assert.deepEqual(await store!.webhooks.lag(), [], 'a disabled endpoint has no lag')
    })
  })

  it('fail schedules a retry or disables; advance clears the failure; enabling again resumes at the position', async () => {
    await withStores(kind, 1, async ([store]) => {
      const endpoint = await create(store!)
      await addOrders(store!, 1n, 2)
      const event = endpoint.position + 1n
      const firstTry = '2026-11-27T10:00:00.000Z'
      let lease = await leaseOne(store!, 'a')
      const retryAt = new Date(Date.now() + 5000)
      assert.equal(await store!.webhooks.fail(lease, attempt(event, { attemptedAt: firstTry, status: 500 }), { retryAt }), true)
      let found = (await store!.webhooks.find(endpoint.id))!
      assert.deepEqual(
        [found.position, found.failingSince, found.nextAttemptAt, found.enabled],
        [endpoint.position, firstTry, retryAt.toISOString(), true],
      )
      assert.equal(await store!.webhooks.advance(lease, event, attempt(event)), false, 'fail ended the lease')

      lease = await leaseOne(store!, 'a', new Date(retryAt.getTime() + 1))
      assert.equal(lease.failures, 1)
      const retryAt2 = new Date(Date.now() + 10_000)
      assert.equal(await store!.webhooks.fail(lease, attempt(event, { status: null, error: 'timeout' }), { retryAt: retryAt2 }), true)
      found = (await store!.webhooks.find(endpoint.id))!
      assert.equal(found.failingSince, firstTry, 'failing since the first failure')
      assert.equal(found.nextAttemptAt, retryAt2.toISOString())

      lease = await leaseOne(store!, 'a', new Date(retryAt2.getTime() + 1))
      assert.equal(lease.failures, 2)
      assert.equal(await store!.webhooks.advance(lease, event, attempt(event)), true)
      found = (await store!.webhooks.find(endpoint.id))!
      assert.deepEqual([found.position, found.failingSince, found.nextAttemptAt], [event, null, null])
      assert.equal(lease.failures, 0)

      const gone = event + 1n
      assert.equal(await store!.webhooks.fail(lease, attempt(gone, { status: 410 }), { disable: 'endpoint_gone' }), true)
      found = (await store!.webhooks.find(endpoint.id))!
      assert.deepEqual([found.enabled, found.disabledReason, found.position, found.nextAttemptAt], [false, 'endpoint_gone', event, null])
      assert.ok(found.failingSince !== null)
      assert.deepEqual(await store!.webhooks.lease('a', new Date(), LEASE_MS, 10), [], 'disabled: not leased')
      assert.deepEqual(
        (await store!.webhooks.attempts(endpoint.id, 10))!.map((a) => [a.eventId, a.status, a.error]),
        [
          [gone, 410, null],
          [event, 200, null],
          [event, null, 'timeout'],
          [event, 500, null],
        ],
      )

      const enabled = await store!.webhooks.update(endpoint.id, { enabled: true })
      assert.deepEqual(
        [enabled!.enabled, enabled!.disabledReason, enabled!.position, enabled!.failingSince, enabled!.nextAttemptAt],
        [true, null, event, null, null],
      )
      lease = await leaseOne(store!, 'a')
      assert.equal(lease.failures, 0)
      assert.deepEqual(events(await store!.webhooks.next(lease, 10)).events.map((e) => e.position), [gone], 'resumes where it stopped')
    })
  })

  it('keeps the 100 newest attempts of each endpoint, read newest first', async () => {
    await withStores(kind, 1, async ([store]) => {
      const busy = await create(store!)
      const quiet = await create(store!)
      await addOrders(store!, 1n, 1)
      const leases = await store!.webhooks.lease('a', new Date(), LEASE_MS, 10)
      const quietLease = leases.find((l) => l.endpoint.id === quiet.id)!
      assert.equal(await store!.webhooks.advance(quietLease, quietLease.endpoint.position, attempt(9n, { durationMs: 3.6 })), true)
      const lease = leases.find((l) => l.endpoint.id === busy.id)!
      for (let i = 1; i <= 105; i++) {
        assert.equal(await store!.webhooks.advance(lease, lease.endpoint.position, attempt(BigInt(i), { status: 200 + (i % 3) })), true)
      }
      const kept = (await store!.webhooks.attempts(busy.id, 1000))!
      assert.deepEqual(
        kept.map((a) => a.eventId),
        Array.from({ length: 100 }, (_, i) => BigInt(105 - i)),
      )
      assert.deepEqual(
        (await store!.webhooks.attempts(busy.id, 3))!.map((a) => [a.eventId, a.status]),
        [
          [105n, 200],
          [104n, 202],
          [103n, 201],
        ],
      )
      const [only] = (await store!.webhooks.attempts(quiet.id, 100))!
      assert.deepEqual({ ...only!, attemptedAt: '' }, { eventId: 9n, attemptedAt: '', status: 200, error: null, durationMs: 4 })
      assert.equal(await store!.webhooks.attempts(12345n, 10), undefined)
    })
  })

  it('deletes old attempts in batches as the position moves: fewer than 200 stored, the newest 100 shown', async () => {
    await withStores(kind, 1, async ([store], sql) => {
      const endpoint = await create(store!)
      await addOrders(store!, 1n, 1)
      const [lease] = await store!.webhooks.lease('a', new Date(), LEASE_MS, 10)
      const from = lease!.endpoint.position
      const stored = async (): Promise<number> =>
        Number((await sql.query<{ n: bigint | number | string }>(`SELECT count(*) AS n FROM webhook_attempts WHERE endpoint_id = ${endpoint.id}`))[0]!.n)
      let most = 0
      for (let i = 1n; i <= 350n; i++) {
        assert.equal(await store!.webhooks.advance(lease!, from + i, attempt(from + i)), true)
        most = Math.max(most, await stored())
      }
      assert.ok(most < 200 && most >= 100, `at most ${most} attempts stored`)
      assert.deepEqual(
        (await store!.webhooks.attempts(endpoint.id, 1000))!.map((a) => a.eventId),
        Array.from({ length: 100 }, (_, i) => from + 350n - BigInt(i)),
      )
      // A failure deletes them at once.
      await store!.webhooks.fail(lease!, attempt(from + 351n), { retryAt: new Date() })
      assert.equal(await stored(), 100)
    })
  })

  it('update changes what is given and nothing else; an unknown id is undefined', async () => {
    await withStores(kind, 1, async ([store]) => {
      const endpoint = await create(store!, ['order.created'])
      const described = await store!.webhooks.update(endpoint.id, {
        url: 'https://other.example/hook',
        eventTypes: ['order.cancelled', 'order.created', 'order.cancelled'],
        description: 'orders to the warehouse',
      })
      assert.deepEqual(described, {
        ...endpoint,
        url: 'https://other.example/hook',
        eventTypes: ['order.created', 'order.cancelled'],
        description: 'orders to the warehouse',
      })
      assert.deepEqual(await store!.webhooks.update(endpoint.id, {}), described)
      assert.deepEqual(await store!.webhooks.update(endpoint.id, { description: null }), { ...described, description: null })
      const disabled = await store!.webhooks.update(endpoint.id, { enabled: false })
      assert.deepEqual([disabled!.enabled, disabled!.disabledReason], [false, 'disabled_by_request'])
      assert.deepEqual(await store!.webhooks.find(endpoint.id), disabled)
      assert.equal(await store!.webhooks.update(2n ** 63n - 1n, { enabled: true }), undefined)
    })
  })

  it('replay moves the position (checked against the feed), enables, and the old holder of a lease cannot undo it', async () => {
    await withStores(kind, 1, async ([store]) => {
      const endpoint = await create(store!)
      await addOrders(store!, 1n, 4)
      const top = await head(store!)
      await assert.rejects(store!.webhooks.replay(endpoint.id, top + 1n), UnknownEventPositionError)
      const lease = await leaseOne(store!, 'a')
      assert.equal(await store!.webhooks.advance(lease, top, attempt(top)), true)
      await store!.webhooks.update(endpoint.id, { enabled: false })

      const replayed = await store!.webhooks.replay(endpoint.id, endpoint.position + 1n)
      assert.deepEqual(replayed, { ...endpoint, position: endpoint.position + 1n })
      assert.equal(await store!.webhooks.advance(lease, top, null), false, 'the old holder cannot move it back')
      assert.equal(await store!.webhooks.fail(lease, attempt(top), { retryAt: new Date() }), false)
      assert.equal((await store!.webhooks.find(endpoint.id))!.position, endpoint.position + 1n)
      await store!.webhooks.release(lease)
      const again = await leaseOne(store!, 'b')
      assert.deepEqual(events(await store!.webhooks.next(again, 10)).events.map((e) => e.position), [2n, 3n, 4n].map((p) => endpoint.position + p))

      await store!.events.prune(new Date(Date.now() + 60_000), 2)
      await assert.rejects(store!.webhooks.replay(endpoint.id, endpoint.position + 1n), (error: unknown) => {
        assert.ok(error instanceof EventsExpiredError)
        assert.equal(error.prunedThrough, endpoint.position + 2n)
        return true
      })
      assert.equal((await store!.webhooks.replay(endpoint.id, endpoint.position + 2n))!.position, endpoint.position + 2n)
      assert.equal(await store!.webhooks.replay(2n ** 63n - 1n, 0n), undefined)
    })
  })

  it('rotates the secret: the previous one signs until its time, then not', async () => {
    await withStores(kind, 1, async ([store]) => {
      const endpoint = await create(store!)
      await addOrders(store!, 1n, 1)
      const until = new Date(Date.now() + 24 * 3600_000)
      const rotated = `whsec_${Buffer.alloc(32, 2).toString('base64')}`
      assert.equal(await store!.webhooks.rotateSecret(endpoint.id, rotated, until), true)
      const lease = await leaseOne(store!, 'a')
      assert.deepEqual(lease.secrets, { current: rotated, previous: newEndpoint().secret, previousUntil: until.toISOString() })
      await store!.webhooks.release(lease)
      const after = await leaseOne(store!, 'a', new Date(until.getTime() + 1))
      assert.deepEqual(after.secrets, { current: rotated, previous: null, previousUntil: null })
      assert.equal(await store!.webhooks.rotateSecret(2n ** 63n - 1n, rotated, until), false)
    })
  })

  it('remove deletes the endpoint and its attempts; its lease then writes nothing', async () => {
    await withStores(kind, 1, async ([store], sql) => {
      const endpoint = await create(store!)
      const other = await create(store!)
      await addOrders(store!, 1n, 2)
      const leases = await store!.webhooks.lease('a', new Date(), LEASE_MS, 10)
      for (const lease of leases) assert.equal(await store!.webhooks.advance(lease, lease.endpoint.position + 1n, attempt(lease.endpoint.position + 1n)), true)
      const lease = leases.find((l) => l.endpoint.id === endpoint.id)!
      assert.equal(await store!.webhooks.remove(endpoint.id), true)
      assert.equal(await store!.webhooks.remove(endpoint.id), false)
      assert.equal(await store!.webhooks.find(endpoint.id), undefined)
      assert.equal(await store!.webhooks.attempts(endpoint.id, 10), undefined)
      assert.equal(await store!.webhooks.advance(lease, lease.endpoint.position + 1n, attempt(lease.endpoint.position + 1n)), false)
      assert.equal(await store!.webhooks.renew(lease, new Date(), LEASE_MS), false)
      const counts = await sql.query<{ endpoint_id: bigint | number | string; n: bigint | number | string }>(
        'SELECT endpoint_id, count(*) AS n FROM webhook_attempts GROUP BY endpoint_id',
      )
      assert.deepEqual(
        counts.map((c) => [String(c.endpoint_id), String(c.n)]),
        [[String(other.id), '1']],
      )
      assert.deepEqual((await store!.webhooks.list()).map((e) => e.id), [other.id])
    })
  })

  it('a change to what an endpoint is sent moves its revision: the holder learns it at its next advance, a description alone does not', async () => {
    await withStores(kind, 1, async ([store]) => {
      const endpoint = await create(store!)
      await addOrders(store!, 1n, 8)
      const changes: [string, () => Promise<unknown>, boolean][] = [
        ['description', () => store!.webhooks.update(endpoint.id, { description: 'only words' }), false],
        ['url', () => store!.webhooks.update(endpoint.id, { url: 'https://hooks.example/moved' }), true],
        ['eventTypes', () => store!.webhooks.update(endpoint.id, { eventTypes: ['order.created'] }), true],
        ['rotation', () => store!.webhooks.rotateSecret(endpoint.id, newEndpoint().secret, new Date(Date.now() + 60_000)), true],
        ['enabled: false', () => store!.webhooks.update(endpoint.id, { enabled: false }), true],
      ]
      for (const [what, change, moves] of changes) {
        await store!.webhooks.update(endpoint.id, { enabled: true })
        const lease = await leaseOne(store!, `owner-${what}`)
        assert.equal(await store!.webhooks.unchanged(lease), true, `${what}: unchanged right after the lease`)
        await change()
        assert.equal(await store!.webhooks.unchanged(lease), !moves, `${what}: unchanged() after it`)
        const position = lease.endpoint.position + 1n
        assert.equal(await store!.webhooks.advance(lease, position, attempt(position)), true, `${what}: the delivery in flight still advances`)
        assert.equal(lease.changed, moves, `${what}: the advance says whether it changed`)
        await store!.webhooks.release(lease)
      }
      // A replay moves the position: the holder's advance changes nothing, and unchanged() says so.
      await store!.webhooks.update(endpoint.id, { enabled: true })
      const lease = await leaseOne(store!, 'owner-replay')
      await store!.webhooks.replay(endpoint.id, 0n)
      assert.equal(await store!.webhooks.unchanged(lease), false)
      assert.equal(await store!.webhooks.advance(lease, lease.endpoint.position + 1n, null), false)
    })
  })

  it('a released endpoint goes behind those released before it: endpoints take turns', async () => {
    await withStores(kind, 1, async ([store]) => {
      const [a, b, c] = [await create(store!), await create(store!), await create(store!)]
      await addOrders(store!, 1n, 2)
      const first = await store!.webhooks.lease('one', new Date(), LEASE_MS, 2)
      assert.deepEqual(first.map((lease) => lease.endpoint.id), [a.id, b.id])
      await store!.webhooks.release(first[0]!)
      await sleep(5)
      await store!.webhooks.release(first[1]!)
      // c was never leased, then a was released before b.
      const order: bigint[] = []
      for (let i = 0; i < 3; i++) {
        const [lease] = await store!.webhooks.lease(`turn-${i}`, new Date(), LEASE_MS, 1)
        order.push(lease!.endpoint.id)
      }
      assert.deepEqual(order, [c.id, a.id, b.id])
    })
  })

  it('a previous secret is erased once its signing window is over, and not before', async () => {
    await withStores(kind, 1, async ([store], sql) => {
      const [ending, lasting] = [await create(store!), await create(store!)]
      const now = Date.now()
      await store!.webhooks.rotateSecret(ending.id, newEndpoint().secret, new Date(now + 1000))
      await store!.webhooks.rotateSecret(lasting.id, newEndpoint().secret, new Date(now + 86_400_000))
      assert.equal(await store!.webhooks.forgetPreviousSecrets(new Date(now)), 0, 'no window over yet')
      assert.equal(await store!.webhooks.forgetPreviousSecrets(new Date(now + 1000)), 1)
      const rows = await sql.query<{ id: bigint | number | string; previous_secret: string | null; previous_until: unknown }>(
        'SELECT id, previous_secret, previous_until FROM webhook_endpoints ORDER BY id',
      )
      assert.deepEqual(
        rows.map((row) => [String(row.id), row.previous_secret === null, row.previous_until === null]),
        [
          [String(ending.id), true, true],
          [String(lasting.id), false, false],
        ],
      )
    })
  })

  it('lag: the events after each enabled endpoint\'s position, whatever their types, from positions alone', async () => {
    await withStores(kind, 1, async ([store]) => {
      const first = await create(store!, ['order.shipped'])
      await addOrders(store!, 1n, 3)
      const second = await create(store!)
      await store!.orders.cancel(1n, null)
      const disabled = await create(store!)
      await store!.webhooks.update(disabled.id, { enabled: false })
      await addOrders(store!, 10n, 2)
      assert.deepEqual(await store!.webhooks.lag(), [
        { id: first.id, events: 6n },
        { id: second.id, events: 3n },
      ])
    })
  })
})
