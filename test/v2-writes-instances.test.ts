import assert from 'node:assert/strict'
import { it } from 'node:test'
import { bearer, forEachStore, order, records, serversOnOneDatabase } from './support/harness.js'
import { place, post } from './support/place.js'
import { stopServer } from './support/server-process.js'
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

forEachStore('v2 writes across server processes on one database', (kind) => {
  const servers = serversOnOneDatabase(kind, {
    seed: (store) => store.orders.import(records(Array.from({ length: 20 }, (_, i) => order({ id: BigInt(i + 1), petId: 1n, quantity: 1 })))),
  })

  it('places exactly one order for 24 concurrent requests with one key over two processes', async () => {
    const { a, b, key } = servers
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

  it('answers concurrent retries of a committed place over two processes all from its record: replays, and 422 for another body', async () => {
    const { a, b, key } = servers
    const body = '{"petId": 515151, "quantity": 2}'
    const first = await place(a.origin, key, body, 'retried-24')
    assert.equal(first.status, 201, first.text)
    // 24 retries at once: each process's first holds the key while its batch reads the record; the
    // others must read that committed record too, not answer 409 as if the first were still in flight.
    const retries = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        place((i % 2 === 0 ? a : b).origin, key, i % 8 === 7 ? '{"petId": 515151, "quantity": 3}' : body, 'retried-24'),
      ),
    )
    retries.forEach((answer, i) => {
      if (i % 8 === 7) assert.deepEqual([answer.status, answer.body.code], [422, 'idempotency_key_reused'], answer.text)
      else assert.deepEqual([answer.status, answer.text, answer.headers.get('idempotent-replayed')], [201, first.text, 'true'])
    })
  })

  it('of a cancel and a ship racing on one pending order on two processes, exactly one wins; the other is 409', async () => {
    const { a, b, key, store } = servers
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
    const { key } = servers
    const first = await place(servers.a.origin, key, body, 'survives-restart')
    assert.equal(first.status, 201)
    await stopServer(servers.a)
    servers.a = await servers.spawn()
    const again = await place(servers.a.origin, key, '{"shipDate": "2026-12-01T11:00:00+01:00", "quantity": 2, "petId": 5}', 'survives-restart')
    assert.deepEqual([again.status, again.text, again.headers.get('location'), again.headers.get('idempotent-replayed')], [201, first.text, first.headers.get('location'), 'true'])
  })

  it('keeps every order it answered 201 for, with its order.created event, when SIGKILLed while 50 clients place; each key with its order or neither', async () => {
    const { b, key, store } = servers
    const victim = await servers.spawn()
    const acknowledged: WireOrder[] = []
    const firstAnswers = new Map<string, string>() // Idempotency-Key → the 201's body
    const keyed: { key: string; body: string; tag: string }[] = []
    let killed = false
    let n = 0
    const client = async (c: number): Promise<void> => {
      while (!killed) {
        const i = n++
        // Each request's order is told apart by its pet and its ship date (a second apart).
        const shipDate = new Date(Date.UTC(2027, 0, 1) + i * 1000).toISOString()
        const body = `{"petId": ${1000 + c}, "quantity": ${1 + (i % 1000)}, "shipDate": "${shipDate}"}`
        const idempotencyKey = i % 2 === 0 ? `kill-${i}` : undefined
        if (idempotencyKey !== undefined) keyed.push({ key: idempotencyKey, body, tag: `${1000 + c} ${shipDate}` })
        let answer
        try {
          answer = await place(victim.origin, key, body, idempotencyKey)
        } catch {
          return // the connection died with the server: never acknowledged
        }
        assert.equal(answer.status, 201, answer.text)
        acknowledged.push(answer.body)
        if (idempotencyKey !== undefined) firstAnswers.set(idempotencyKey, answer.text)
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
    const createdEvents = new Map((await allEvents(b.origin, key)).filter((event) => event.type === 'order.created').map((event) => [event.order.id, event.order]))
    for (const placed of acknowledged) {
      const stored = await store.orders.find(BigInt(placed.id))
      assert.ok(stored !== undefined, `order ${placed.id} was answered 201 but is not in the database`)
      assert.equal(String(stored.petId), placed.petId)
      assert.deepEqual(createdEvents.get(placed.id), placed, `order ${placed.id}: its order.created event`)
    }
    assert.equal(new Set(acknowledged.map((placed) => placed.id)).size, acknowledged.length, 'no id given twice')

    // Sent again, a key whose order committed (answered or not) replays that order, and one whose
    // order did not places it now: a key and its order are stored together or not at all.
    const committed = new Map<string, string[]>()
    for (const created of createdEvents.values()) {
      const tag = `${created.petId} ${created.shipDate}`
      committed.set(tag, [...(committed.get(tag) ?? []), created.id])
    }
    let replayed = 0
    for (const request of keyed) {
      const before = committed.get(request.tag) ?? []
      assert.ok(before.length <= 1, `${request.key}: one order at most`)
      const again = await place(b.origin, key, request.body, request.key)
      assert.equal(again.status, 201, again.text)
      if (before.length === 1) {
        replayed++
        assert.deepEqual([again.headers.get('idempotent-replayed'), again.body.id], ['true', before[0]], `${request.key}: its order committed`)
        const first = firstAnswers.get(request.key)
        if (first !== undefined) assert.equal(again.text, first, `${request.key}: the first response again`)
      } else {
        assert.equal(again.headers.get('idempotent-replayed'), null, `${request.key}: nothing committed, so it places now`)
        assert.equal(firstAnswers.has(request.key), false, `${request.key} was answered 201 but has no order`)
      }
    }
    assert.ok(replayed >= firstAnswers.size, 'every acknowledged key replays')
  })

  it('gives two processes placing at once distinct ids above every id held, imported ones past 2^53 included; after a restart, above them all', async () => {
    const { a, b, key, store } = servers
    const imported = 2n ** 53n + 10n // a double would not tell it from its neighbours
    await store.orders.import(records([order({ id: imported, petId: 2n, quantity: 1 })]))
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => place((i % 2 === 0 ? a : b).origin, key, `{"petId": 77, "quantity": ${i + 1}}`)))
    for (const answer of answers) assert.equal(answer.status, 201, answer.text)
    const ids = answers.map((answer) => BigInt(answer.body.id))
    assert.equal(new Set(ids).size, ids.length, 'no id given twice')
    assert.ok(ids.every((id) => id > imported), `every id above ${imported}: ${ids.join(', ')}`)
    for (const answer of answers) {
      const stored = await store.orders.find(BigInt(answer.body.id))
      assert.equal(stored?.quantity, answer.body.quantity, `order ${answer.body.id} is the one answered`)
    }
    const highest = ids.reduce((x, y) => (x > y ? x : y))
    await Promise.all([stopServer(a), stopServer(b)])
    ;[servers.a, servers.b] = await Promise.all([servers.spawn(), servers.spawn()])
    const next = await Promise.all([servers.a, servers.b].map((server) => place(server.origin, key, '{"petId": 77, "quantity": 1}')))
    for (const answer of next) assert.ok(BigInt(answer.body.id) > highest, `${answer.body.id} above ${highest}`)
    assert.notEqual(next[0]!.body.id, next[1]!.body.id)
  })
})
