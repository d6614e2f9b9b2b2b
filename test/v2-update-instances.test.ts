import assert from 'node:assert/strict'
import { it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { bearer, forEachStore, serversOnOneDatabase } from './support/harness.js'
import { place, post, type Answer } from './support/place.js'
import { stopServer, type ServerProcess } from './support/server-process.js'
import { parseExact } from './support/v2.js'

// updateOrder (PATCH /v2/store/orders/{id}) raced across `serve` processes on one database (SQLite:
// two processes on one file; PostgreSQL: two instances), and killed during a stream of patches. The
// single-instance behaviour of the operation is tested elsewhere.

/** A v2 Order as a response or an event carries it, ids exact; key order as sent. */
interface Order {
  id: string
  status: string
  version: number
  quantity?: number
  metadata?: Record<string, string>
  [field: string]: unknown
}

interface WireEvent {
  id: string
  type: string
  occurredAt: string
  order: Order
  previous?: { quantity?: number | null; metadata?: Record<string, string> | null; [field: string]: unknown }
}

/** An order's JSON as a text, key order kept: two of them are equal when the orders are the same bytes. */
const text = (order: Order): string => JSON.stringify(order)
/** The order an answer carries, as `text` writes it. */
const answered = (answer: Answer): string => text(answer.body as unknown as Order)

/** Every event of the feed, from the oldest, through one server. */
async function allEvents(origin: string, key: string): Promise<WireEvent[]> {
  const events: WireEvent[] = []
  let after = ''
  for (;;) {
    const response = await fetch(`${origin}/v2/store/order-events?limit=1000${after === '' ? '' : `&after=${after}`}`, { headers: bearer(key) })
    const body = await response.text()
    assert.equal(response.status, 200, body)
    const page = parseExact<{ data: WireEvent[]; nextCursor: string }>(body)
    events.push(...page.data)
    if (page.data.length === 0) return events
    after = page.nextCursor
  }
}

/** Each order's events, in feed order. */
function byOrder(events: WireEvent[]): Map<string, WireEvent[]> {
  const orders = new Map<string, WireEvent[]>()
  for (const event of events) orders.set(event.order.id, [...(orders.get(event.order.id) ?? []), event])
  return orders
}

/** PATCH a merge patch (a JSON text, as given) to an order, with If-Match when given. */
async function patch(origin: string, key: string, id: string, body: string, ifMatch?: string): Promise<Answer> {
  const response = await fetch(`${origin}/v2/store/orders/${id}`, {
    method: 'PATCH',
    headers: { ...bearer(key), 'content-type': 'application/merge-patch+json', ...(ifMatch === undefined ? {} : { 'if-match': ifMatch }) },
    body,
  })
  const answer = await response.text()
  return { status: response.status, headers: response.headers, text: answer, body: answer === '' ? (undefined as never) : parseExact(answer) }
}

/** getOrder: the order as stored, and its ETag. */
async function getOrder(origin: string, key: string, id: string): Promise<{ order: Order; etag: string | null }> {
  const response = await fetch(`${origin}/v2/store/orders/${id}`, { headers: bearer(key) })
  const body = await response.text()
  assert.equal(response.status, 200, body)
  return { order: parseExact<Order>(body), etag: response.headers.get('etag') }
}

/** Places a pending order (version 1) and returns its id. */
async function placed(origin: string, key: string, quantity = 5): Promise<string> {
  const answer = await place(origin, key, `{"petId": 31, "quantity": ${quantity}}`)
  assert.equal(answer.status, 201, answer.text)
  assert.equal((answer.body as unknown as Order).version, 1)
  return answer.body.id
}

/** Asserts the Error body of an answer: exactly code, message and status. */
function assertError(answer: Answer, status: number, code: string): string {
  assert.equal(answer.status, status, answer.text)
  const body = JSON.parse(answer.text) as Record<string, unknown>
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status'], answer.text)
  assert.deepEqual([body.code, body.status], [code, status], answer.text)
  return body.message as string
}

/**
 * The events of one order (feed order) tell one history: created at version 1, then one more per
 * event; every order.updated's `previous` holds, for each field it names, the value the event before
 * left, and the fields it does not name are unchanged.
 */
function assertHistory(id: string, events: WireEvent[]): void {
  assert.ok(events.length > 0, `order ${id}: no event`)
  assert.equal(events[0]!.type, 'order.created', `order ${id}: the first event`)
  events.forEach((event, i) => assert.equal(event.order.version, i + 1, `order ${id}: event ${i} (${event.type}) has version ${i + 1}`))
  for (let i = 1; i < events.length; i++) {
    const [before, event] = [events[i - 1]!.order, events[i]!]
    if (event.type !== 'order.updated') {
      assert.equal(event.previous, undefined, `order ${id}: ${event.type} has no previous`)
      continue
    }
    assert.ok(event.previous !== undefined && Object.keys(event.previous).length > 0, `order ${id}: event ${i} names what it changed`)
    for (const field of ['petId', 'quantity', 'shipDate', 'metadata']) {
      if (Object.hasOwn(event.previous, field)) {
        assert.deepEqual(event.previous[field], before[field] ?? null, `order ${id}: event ${i}'s previous.${field} is what event ${i - 1} left`)
        assert.notDeepEqual(event.order[field], before[field], `order ${id}: event ${i} changed ${field}`)
      } else {
        assert.deepEqual(event.order[field], before[field], `order ${id}: event ${i} left ${field} as it was`)
      }
    }
    assert.equal(event.order.status, before.status, `order ${id}: an update keeps the status`)
  }
}

forEachStore('updateOrder across server processes on one database', (kind) => {
  const servers = serversOnOneDatabase(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })

  it('of 20 patches racing with one If-Match on two processes, exactly one is 200; 19 are 412 naming the winner\'s version; one order.updated', async () => {
    const { a, b, key } = servers
    const id = await placed(a.origin, key)
    const winners: string[] = []
    for (let round = 0; round < 5; round++) {
      const read = await getOrder(b.origin, key, id)
      const version = read.order.version
      assert.equal(read.etag, `"${version}"`)
      // Each client's change is its own: none is a no-op, none is another's.
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, n) => patch((n % 2 === 0 ? a : b).origin, key, id, `{"metadata": {"winner": "${round}-${n}"}}`, read.etag!)),
      )
      const won = answers.flatMap((answer, n) => (answer.status === 200 ? [n] : []))
      assert.equal(won.length, 1, `round ${round}: ${answers.map((answer) => `${answer.status} ${answer.text}`).join('\n')}`)
      const winner = answers[won[0]!]!
      const order = winner.body as unknown as Order
      assert.equal(order.version, version + 1)
      assert.deepEqual(order.metadata, { winner: `${round}-${won[0]}` })
      assert.equal(winner.headers.get('etag'), `"${version + 1}"`)
      for (const answer of answers) {
        if (answer === winner) continue
        const message = assertError(answer, 412, 'precondition_failed')
        assert.match(message, new RegExp(`\\bversion ${version + 1}\\b`), 'the message names the current version')
        assert.equal(answer.headers.get('etag'), winner.headers.get('etag'), "the 412's ETag is the winner's")
      }
      const now = await getOrder(a.origin, key, id)
      assert.equal(text(now.order), answered(winner), 'the order is as the winner left it')
      assert.equal(now.etag, `"${version + 1}"`)
      winners.push(answered(winner))
    }
    const events = byOrder(await allEvents(a.origin, key)).get(id)!
    assertHistory(id, events)
    assert.deepEqual(
      events.map((event) => event.type),
      ['order.created', ...winners.map(() => 'order.updated')],
      'one order.updated per round: the winner',
    )
    assert.deepEqual(events.slice(1).map((event) => text(event.order)), winners, 'each event is its winner\'s order')
  })

  it('lands all 20 concurrent patches of distinct metadata keys without If-Match on two processes: every key, version 21, 20 events chained by previous', async () => {
    const { a, b, key } = servers
    const ids = await Promise.all([a, b, a].map((server) => placed(server.origin, key)))
    // 20 patches of each order, at once, alternating the processes: each sets a key of its own.
    const sent = ids.flatMap((id) => Array.from({ length: 20 }, (_, n) => ({ id, n })))
    const answers = await Promise.all(sent.map(({ id, n }, i) => patch((i % 2 === 0 ? a : b).origin, key, id, `{"metadata": {"k${n}": "v${n}"}}`)))
    const feed = byOrder(await allEvents(b.origin, key))
    for (const id of ids) {
      const mine = answers.filter((_, i) => sent[i]!.id === id)
      for (const [n, answer] of mine.entries()) {
        assert.equal(answer.status, 200, answer.text)
        assert.equal((answer.body as unknown as Order).metadata?.[`k${n}`], `v${n}`, `order ${id}: patch ${n}'s answer holds its key`)
        assert.equal(answer.headers.get('etag'), `"${(answer.body as unknown as Order).version}"`)
      }
      assert.deepEqual(
        mine.map((answer) => (answer.body as unknown as Order).version).sort((x, y) => x - y),
        Array.from({ length: 20 }, (_, n) => n + 2),
        `order ${id}: each patch made one version`,
      )

      const { order } = await getOrder(a.origin, key, id)
      assert.equal(order.version, 21)
      assert.deepEqual(order.metadata, Object.fromEntries(Array.from({ length: 20 }, (_, n) => [`k${n}`, `v${n}`])), `order ${id}: no key lost`)

      const events = feed.get(id)!
      assertHistory(id, events)
      const updates = events.slice(1)
      assert.equal(updates.length, 20)
      assert.ok(updates.every((event) => event.type === 'order.updated'))
      assert.equal(updates[0]!.previous!.metadata, null, 'the first patch found no metadata')
      for (let i = 0; i + 1 < updates.length; i++) {
        assert.deepEqual(updates[i + 1]!.previous, { metadata: updates[i]!.order.metadata }, `order ${id}: event ${i + 1}'s previous is event ${i}'s metadata`)
      }
      for (const event of updates) {
        const added = Object.keys(event.order.metadata!).filter((k) => !Object.hasOwn(event.previous!.metadata ?? {}, k))
        assert.equal(added.length, 1, `order ${id}: each event adds one key`)
      }
      assert.equal(text(updates.at(-1)!.order), text(order), `order ${id}: the last event is the order as stored`)
      // Each answer is the order as its own event shows it.
      const byVersion = new Map(updates.map((event) => [event.order.version, text(event.order)]))
      for (const answer of mine) assert.equal(answered(answer), byVersion.get((answer.body as unknown as Order).version))
    }
  })

  it('of a patch of quantity racing a ship and a cancel on the other process, over 60 orders, every outcome is consistent and every order\'s events in order', async (t) => {
    const { a, b, key } = servers
    const ORDERS = 60
    const outcomes = new Map<string, number>()
    for (let group = 0; group < ORDERS / 10; group++) {
      // Ten orders at a time; each order's three requests at once.
      const results = await Promise.all(
        Array.from({ length: 10 }, async (_, j) => {
          const i = group * 10 + j
          const [patchOn, otherOn] = i % 2 === 0 ? [a, b] : [b, a]
          const id = await placed(otherOn.origin, key)
          const requests = [
            () => patch(patchOn.origin, key, id, '{"quantity": 6}'),
            () => post(otherOn.origin, key, `/store/orders/${id}/ship`),
            () => post(otherOn.origin, key, `/store/orders/${id}/cancel`, '{"reason": "out_of_stock"}'),
          ]
          // Each starts after a random pause of 0 to 3 ms, so that each of the three wins some races.
          const [patched, shipped, cancelled] = await Promise.all(requests.map((request) => sleep(Math.floor(Math.random() * 4)).then(request)))
          const context = `order ${id}: patch ${patched!.status} ${patched!.text}; ship ${shipped!.status} ${shipped!.text}; cancel ${cancelled!.status} ${cancelled!.text}`

          // Of the ship and the cancel exactly one wins; the other is told why.
          assert.deepEqual([shipped!.status, cancelled!.status].sort(), [200, 409], context)
          const [won, lost, wonType, status, lostCode] =
            shipped!.status === 200
              ? [shipped!, cancelled!, 'order.shipped', 'shipped', 'order_already_shipped']
              : [cancelled!, shipped!, 'order.cancelled', 'cancelled', 'order_cancelled']
          assertError(lost, 409, lostCode)
          const wonOrder = won.body as unknown as Order
          assert.equal(wonOrder.status, status, context)

          // The patch came first (200, and the winner saw its version and quantity), or after (409).
          let types: string[]
          if (patched!.status === 200) {
            const order = patched!.body as unknown as Order
            assert.deepEqual([order.status, order.version, order.quantity], ['pending', 2, 6], context)
            assert.deepEqual([wonOrder.version, wonOrder.quantity], [3, 6], context)
            types = ['order.created', 'order.updated', wonType]
          } else {
            assertError(patched!, 409, 'order_not_pending')
            assert.deepEqual([wonOrder.version, wonOrder.quantity], [2, 5], context)
            types = ['order.created', wonType]
          }
          const outcome = `${patched!.status === 200 ? 'patch then ' : ''}${status}${patched!.status === 200 ? '' : ' then no patch'}`
          outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
          return { id, types, won: answered(won) }
        }),
      )
      const feed = byOrder(await allEvents(a.origin, key))
      for (const { id, types, won } of results) {
        const events = feed.get(id)!
        assertHistory(id, events)
        assert.deepEqual(events.map((event) => event.type), types, `order ${id}`)
        assert.equal(text(events.at(-1)!.order), won, `order ${id}: the last event is the winner's answer`)
        assert.equal(text((await getOrder(b.origin, key, id)).order), won, `order ${id}: as stored`)
      }
    }
    assert.equal([...outcomes.values()].reduce((x, y) => x + y), ORDERS)
    t.diagnostic(`${kind}: outcomes of ${ORDERS} races: ${[...outcomes].map(([outcome, n]) => `${outcome} ${n}`).join(', ')}`)
  })

  it('of a patch, a ship and a cancel racing with one If-Match on two processes, over 40 orders, exactly one wins; the other two are 412 naming its version', async (t) => {
    const { a, b, key } = servers
    const ORDERS = 40
    const winners = new Map<string, number>()
    for (let group = 0; group < ORDERS / 10; group++) {
      const results = await Promise.all(
        Array.from({ length: 10 }, async (_, j) => {
          const i = group * 10 + j
          const [patchOn, otherOn] = i % 2 === 0 ? [a, b] : [b, a]
          const id = await placed(patchOn.origin, key)
          const ifMatch = { 'if-match': '"1"' }
          const requests = [
            () => patch(patchOn.origin, key, id, '{"quantity": 6}', '"1"'),
            () => post(otherOn.origin, key, `/store/orders/${id}/ship`, undefined, ifMatch),
            () => post(otherOn.origin, key, `/store/orders/${id}/cancel`, '{"reason": "out_of_stock"}', ifMatch),
          ]
          const answers = await Promise.all(requests.map((request) => sleep(Math.floor(Math.random() * 4)).then(request)))
          const context = `order ${id}: ${answers.map((answer) => `${answer.status} ${answer.text}`).join('; ')}`
          const won = answers.findIndex((answer) => answer.status === 200)
          assert.notEqual(won, -1, context)
          const winner = answers[won]!
          assert.equal((winner.body as unknown as Order).version, 2, context)
          assert.equal(winner.headers.get('etag'), '"2"')
          for (const answer of answers) {
            if (answer === winner) continue
            const message = assertError(answer, 412, 'precondition_failed')
            assert.match(message, /\bversion 2\b/, context)
            assert.equal(answer.headers.get('etag'), '"2"', context)
          }
          const type = ['order.updated', 'order.shipped', 'order.cancelled'][won]!
          winners.set(type, (winners.get(type) ?? 0) + 1)
          return { id, type, won: answered(winner) }
        }),
      )
      const feed = byOrder(await allEvents(b.origin, key))
      for (const { id, type, won } of results) {
        const events = feed.get(id)!
        assertHistory(id, events)
        assert.deepEqual(events.map((event) => event.type), ['order.created', type], `order ${id}: one change, the winner's`)
        assert.equal(text(events[1]!.order), won, `order ${id}: its event is the winner's answer`)
        assert.equal(text((await getOrder(a.origin, key, id)).order), won, `order ${id}: as stored`)
      }
    }
    t.diagnostic(`${kind}: winners of ${ORDERS} races: ${[...winners].map(([type, n]) => `${type} ${n}`).join(', ')}`)
  })

  it('keeps every patch it answered 200 for, with its order.updated event, when SIGKILLed during a stream of patches; no event without its change', async () => {
    const { b, key } = servers
    const victim = await servers.spawn()
    let restarted: ServerProcess | undefined
    try {
      const ORDERS = 40
      const CLIENTS = 8
      const MAX_PER_CLIENT = 2000
      const ids: string[] = []
      for (let i = 0; i < ORDERS; i++) ids.push(await placed(b.origin, key))

      // Client c patches the orders in turn, setting its own key to its request's number (and every
      // third time the quantity too); even clients talk to the victim, odd ones to the other process.
      interface Sent {
        client: number
        n: number
        id: string
      }
      const acknowledged: { sent: Sent; answer: Answer }[] = []
      const inFlight = new Map<number, Sent>() // client → its request not answered when the victim died
      let onVictim = 0
      let killed = false
      const client = async (c: number): Promise<void> => {
        const server = c % 2 === 0 ? victim : b
        for (let n = 0; n < MAX_PER_CLIENT && !killed; n++) {
          const sent = { client: c, n, id: ids[(c * 7 + n) % ORDERS]! }
          const body = n % 3 === 0 ? `{"quantity": ${1 + ((c * 1000 + n) % 999)}, "metadata": {"c${c}": "${n}"}}` : `{"metadata": {"c${c}": "${n}"}}`
          inFlight.set(c, sent)
          let answer: Answer
          try {
            answer = await patch(server.origin, key, sent.id, body)
          } catch {
            return // the connection died with the server: never acknowledged
          }
          assert.equal(answer.status, 200, answer.text)
          inFlight.delete(c)
          acknowledged.push({ sent, answer })
          if (server === victim) onVictim++
        }
      }
      const clients = Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)))
      const enough = (async () => {
        while (onVictim < 300 && !killed) await new Promise((resolve) => setTimeout(resolve, 5))
      })()
      try {
        await Promise.race([enough, clients]) // a wrong answer fails the test here
      } finally {
        victim.child.kill('SIGKILL')
        killed = true
      }
      await clients
      assert.equal((await victim.exited).signal, 'SIGKILL')
      assert.ok(onVictim >= 300, `${onVictim} patches answered by the victim`)

      restarted = await servers.spawn()
      const feed = byOrder(await allEvents(restarted.origin, key))
      const stored = new Map<string, Order>()
      for (const id of ids) {
        const { order } = await getOrder(restarted.origin, key, id)
        stored.set(id, order)
        const events = feed.get(id)!
        assertHistory(id, events)
        assert.ok(events.slice(1).every((event) => event.type === 'order.updated'), `order ${id}: only updates`)
        // No event without its change, and no change without its event.
        assert.equal(text(events.at(-1)!.order), text(order), `order ${id}: the last event is the order as stored`)
      }

      // Every 200 is in the database: its order, exactly as answered, is one of its order's events…
      for (const { sent, answer } of acknowledged) {
        const order = answer.body as unknown as Order
        const event = feed.get(sent.id)![order.version - 1]
        assert.equal(event && text(event.order), answered(answer), `client ${sent.client} patch ${sent.n} of order ${sent.id}: its event`)
      }
      // … and the order shows it: each client's key holds its last acknowledged value there, or that
      // of its one request the victim never answered (which may have committed).
      for (let c = 0; c < CLIENTS; c++) {
        for (const id of ids) {
          const last = acknowledged.filter(({ sent }) => sent.client === c && sent.id === id).at(-1)?.sent.n
          const pending = inFlight.get(c)?.id === id ? inFlight.get(c)!.n : undefined
          const value = stored.get(id)!.metadata?.[`c${c}`]
          const allowed = [last, pending].filter((n) => n !== undefined).map(String)
          if (allowed.length === 0) assert.equal(value, undefined, `order ${id}: client ${c} never patched it`)
          else assert.ok(allowed.includes(value!), `order ${id}: client ${c}'s key is ${value}, not one of ${allowed.join(', ')}`)
        }
      }
    } finally {
      if (victim.child.exitCode === null && victim.child.signalCode === null) victim.child.kill('SIGKILL')
      if (restarted !== undefined) await stopServer(restarted)
    }
  })
})
