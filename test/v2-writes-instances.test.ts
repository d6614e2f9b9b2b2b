import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import { generateApiKey, SCOPES } from '../src/domain/api-keys.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { bearer, createDatabase, forEachStore, order, records, type TestDatabaseHandle } from './support/harness.js'
import { place, post } from './support/place.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'
import { parseExact, type WireOrder } from './support/v2.js'

interface WireEvent {
  id: string
  type: string
  order: WireOrder
}

/** Every event of the feed, from the oldest, through one server. */
async function allEvents(origin: string, key: string): Promise<WireEvent[]> {
  const events: WireEvent[] = []
  let after = ''
  for (;;) {
    const response = await fetch(`${origin}/v2/store/order-events?limit=1000${after === '' ? '' : `&after=${after}`}`, { headers: bearer(key) })
    assert.equal(response.status, 200)
    const page = parseExact<{ data: WireEvent[]; nextCursor: string }>(await response.text())
    events.push(...page.data)
    if (page.data.length === 0) return events
    after = page.nextCursor
  }
}

async function stop(server: ServerProcess): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGTERM')
  await server.exited
}

forEachStore('v2 writes across server processes on one database', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let key: string
  let a: ServerProcess
  let b: ServerProcess

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    await store.orders.import(records(Array.from({ length: 20 }, (_, i) => order({ id: BigInt(i + 1), petId: 1n, quantity: 1 }))))
    const generated = generateApiKey()
    await store.apiKeys.create({ name: 'writes', hash: generated.hash, displayPrefix: generated.displayPrefix, scopes: [...SCOPES], expiresAt: null })
    key = generated.secret
    ;[a, b] = await Promise.all([spawnServer(database.url), spawnServer(database.url)])
  })
  after(async () => {
    await Promise.all([a, b].filter((server) => server !== undefined).map(stop))
    await store?.close()
    await database?.dispose()
  })

  it('places exactly one order for 24 concurrent requests with one key over two processes', async () => {
    const eventsBefore = (await allEvents(a.origin, key)).length
    const body = '{"petId": 424242, "quantity": 3}'
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => place((i % 2 === 0 ? a : b).origin, key, body, 'one-order-24')))
    const created = answers.filter((answer) => answer.status === 201 && answer.headers.get('idempotent-replayed') === null)
    assert.equal(created.length, 1, answers.map((answer) => `${answer.status} ${answer.text}`).join('\n'))
    for (const answer of answers) {
      if (answer.status === 201) {
        assert.equal(answer.text, created[0]!.text, 'every 201 is the first response')
        assert.equal(answer.headers.get('location'), created[0]!.headers.get('location'))
      } else {
        assert.deepEqual([answer.status, answer.body.code], [409, 'idempotency_key_in_use'], answer.text)
        assert.equal(answer.headers.get('retry-after'), '1')
      }
    }
    // A retry of one that was told to wait is a replay now, on either process.
    for (const origin of [a.origin, b.origin]) {
      const retry = await place(origin, key, body, 'one-order-24')
      assert.deepEqual([retry.status, retry.text, retry.headers.get('idempotent-replayed')], [201, created[0]!.text, 'true'])
    }
    const events = (await allEvents(b.origin, key)).slice(eventsBefore)
    assert.deepEqual(events.map((event) => [event.type, event.order.petId]), [['order.created', '424242']], 'one order, one event')
  })

  it('of a cancel and a ship racing on one pending order on two processes, exactly one wins; the other is 409', async () => {
    const winners = { cancel: 0, ship: 0 }
    for (let id = 1; id <= 10; id++) {
      const [cancelOn, shipOn] = id % 2 === 0 ? [a, b] : [b, a]
      const [cancel, ship] = await Promise.all([post(cancelOn.origin, key, `/store/orders/${id}/cancel`), post(shipOn.origin, key, `/store/orders/${id}/ship`)])
      const statuses = [cancel.status, ship.status].sort()
      assert.deepEqual(statuses, [200, 409], `order ${id}: cancel ${cancel.text}, ship ${ship.text}`)
      if (cancel.status === 200) {
        winners.cancel++
        assert.equal(ship.body.code, 'order_cancelled')
      } else {
        winners.ship++
        assert.equal(cancel.body.code, 'order_already_shipped')
      }
      const stands = await store.orders.find(BigInt(id))
      assert.equal(stands!.status, cancel.status === 200 ? 'cancelled' : 'shipped')
    }
    const events = (await allEvents(a.origin, key)).filter((event) => Number(event.order.id) <= 10 && event.type !== 'order.created')
    assert.equal(events.length, 10, 'one event per order: the winner')
    assert.equal(events.filter((event) => event.type === 'order.cancelled').length, winners.cancel)
  })

  it('replays a key after the server that placed it is restarted', async () => {
    const body = '{"petId": 5, "quantity": 2, "shipDate": "2026-12-01T10:00:00Z"}'
    const first = await place(a.origin, key, body, 'survives-restart')
    assert.equal(first.status, 201)
    await stop(a)
    a = await spawnServer(database.url)
    const again = await place(a.origin, key, '{"shipDate": "2026-12-01T11:00:00+01:00", "quantity": 2, "petId": 5}', 'survives-restart')
    assert.deepEqual([again.status, again.text, again.headers.get('location'), again.headers.get('idempotent-replayed')], [201, first.text, first.headers.get('location'), 'true'])
  })

  it('keeps every order it answered 201 for, with its order.created event, when SIGKILLed while 50 clients place', async () => {
    const victim = await spawnServer(database.url)
    const acknowledged: WireOrder[] = []
    let killed = false
    let n = 0
    const client = async (c: number): Promise<void> => {
      while (!killed) {
        const i = n++
        let answer
        try {
          answer = await place(victim.origin, key, `{"petId": ${1000 + c}, "quantity": ${1 + (i % 1000)}}`, i % 2 === 0 ? `kill-${i}` : undefined)
        } catch {
          return // the connection died with the server: never acknowledged
        }
        assert.equal(answer.status, 201, answer.text)
        acknowledged.push(answer.body)
      }
    }
    const clients = Promise.all(Array.from({ length: 50 }, (_, c) => client(c)))
    const enough = (async () => {
      while (acknowledged.length < 300 && !killed) await new Promise((resolve) => setTimeout(resolve, 5))
    })()
    try {
      await Promise.race([enough, clients])
    } finally {
      victim.child.kill('SIGKILL')
      killed = true
    }
    await clients
    assert.equal((await victim.exited).signal, 'SIGKILL')
    assert.ok(acknowledged.length >= 300)
    const created = new Map((await allEvents(b.origin, key)).filter((event) => event.type === 'order.created').map((event) => [event.order.id, event.order]))
    for (const placed of acknowledged) {
      const stored = await store.orders.find(BigInt(placed.id))
      assert.ok(stored !== undefined, `order ${placed.id} was answered 201 but is not in the database`)
      assert.equal(String(stored.petId), placed.petId)
      assert.deepEqual(created.get(placed.id), placed, `order ${placed.id}: its order.created event`)
    }
    assert.equal(new Set(acknowledged.map((placed) => placed.id)).size, acknowledged.length, 'no id given twice')
  })
})
