import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { it } from 'node:test'
import { hashApiKey } from '../src/domain/api-keys.js'
import type { Store } from '../src/store/store.js'
import { bearer, expectError, forEachStore, startTestServer, within, type TestServer } from './support/harness.js'
import { BIN } from './support/server-process.js'

// What ends a held long poll besides an event or its wait: its key (revoked or expired during the
// hold: 401, never the event), and another key that needs a slot. Each over real HTTP, both stores.
// No duration is asked of the machine here: a poll answered sooner than its wait (30 s) since it was
// sent was ended by what the test names, not by the wait running out, whose timer cannot fire earlier.
const WAIT_S = 30
/** Long enough for a poll to be held on a loaded machine. */
const SETTLE_MS = 15_000

/** Requests held by the server's event feed, as its metrics say. */
async function waiting(server: TestServer): Promise<number> {
  const text = await (await fetch(`${server.origin}/metrics`)).text()
  return Number(/^order_events_waiting (\d+)$/m.exec(text)![1])
}

/** The newest position of the feed. */
async function newest(store: Store): Promise<string> {
  let next = (await store.events.read(undefined, 1000)).next
  for (;;) {
    const page = await store.events.read(next, 1000)
    if (page.count === 0) return String(next)
    next = page.next
  }
}

function poll(server: TestServer, key: string, after: string, wait: number): Promise<Response> {
  return fetch(`${server.origin}/v2/store/order-events?after=${after}&wait=${wait}`, { headers: bearer(key) })
}

async function eventTypes(response: Response): Promise<string[]> {
  const text = await response.text()
  assert.equal(response.status, 200, text)
  return (JSON.parse(text) as { data: { type: string }[] }).data.map((event) => event.type)
}

forEachStore('a held long poll and its key', (kind) => {
  const TTL_MS = 1000 // KEY_CACHE_TTL_MS: how long a revoked key may still be served

  it('a key revoked through the CLI while its poll is held: the event committed later wakes it with 401, not the event', async () => {
    const server = await startTestServer(kind, { env: { KEY_CACHE_TTL_MS: String(TTL_MS), RATE_LIMIT_PER_KEY: '0' } })
    await server.importOrders([{ id: 1n }])
    const revoked = await server.createKey({ name: 'revoked' })
    const kept = await server.createKey({ name: 'kept' })
    const head = await newest(server.store)
    const held = poll(server, revoked, head, WAIT_S)
    const other = poll(server, kept, head, WAIT_S)
    await within(SETTLE_MS, 'both polls are held', async () => (await waiting(server)) === 2)
    // A poll is held only after its key was read, so the key's cache entry is no younger than this.
    const heldSince = performance.now()
    const { id } = (await server.store.apiKeys.findByHash(hashApiKey(revoked)))!
    const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'keys', 'revoke', String(id)], {
      env: { ...process.env, DATABASE_URL: server.database.url },
      timeout: 30_000,
    })
    assert.match(stdout, /revoked/)
    // Past the key cache's bound since the key was read, then an event.
    await sleep(Math.max(0, heldSince + TTL_MS + 100 - performance.now()))
    assert.equal((await server.store.orders.cancel(1n, null)).outcome, 'cancelled')
    const body = await expectError(await held, 401, 'unauthorized')
    assert.equal(body.message, 'The API key has been revoked.')
    assert.deepEqual(await eventTypes(await other), ['order.cancelled'], 'the same event wakes a poll of a valid key with it')
    assert.equal(await waiting(server), 0)
    await server.close()
  })

  it('a key that expires during the hold ends it at its expiresAt with 401', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })
    const expiresAt = new Date(Date.now() + 1500)
    const key = await server.createKey({ expiresAt })
    const after = await newest(server.store)
    const sent = Date.now()
    const response = await poll(server, key, after, WAIT_S)
    const answeredAt = Date.now()
    const body = await expectError(response, 401, 'unauthorized')
    assert.equal(body.message, 'The API key has expired.')
    assert.match(response.headers.get('www-authenticate') ?? '', /error="invalid_token"/)
    assert.ok(answeredAt >= expiresAt.getTime(), `answered ${expiresAt.getTime() - answeredAt} ms before the key expired`)
    assert.ok(answeredAt - sent < WAIT_S * 1000, `answered ${answeredAt - expiresAt.getTime()} ms after the key expired, not at the end of the wait`)
    assert.equal(await waiting(server), 0)
    await server.close()
  })
})

forEachStore('long-poll slots shared between keys', (kind) => {
  it('when every slot is held, a key holding none gets one: the oldest poll of the key holding the most is answered at once, empty', async () => {
    const server = await startTestServer(kind, { env: { EVENTS_MAX_WAITING: '4', RATE_LIMIT_PER_KEY: '0' } })
    await server.importOrders([{ id: 1n }])
    const [a, b, c] = [await server.createKey({ name: 'a' }), await server.createKey({ name: 'b' }), await server.createKey({ name: 'c' })]
    const head = await newest(server.store)
    const oldestSent = performance.now()
    const oldest = poll(server, a, head, WAIT_S)
    await within(SETTLE_MS, "a's first poll is held", async () => (await waiting(server)) === 1)
    const held = [poll(server, a, head, WAIT_S), poll(server, b, head, WAIT_S), poll(server, b, head, WAIT_S)]
    await within(SETTLE_MS, 'every slot is held', async () => (await waiting(server)) === 4)
    // a and b hold two each: b's next poll would only move the imbalance, it is answered at once.
    const started = performance.now()
    assert.deepEqual(await eventTypes(await poll(server, b, head, WAIT_S)), [])
    assert.ok(performance.now() - started < WAIT_S * 1000, 'answered at once, not at the end of its wait')
    assert.equal(await waiting(server), 4, 'a poll of b was not held in place of another')
    held.push(poll(server, c, head, WAIT_S))
    const evicted = await oldest
    assert.ok(performance.now() - oldestSent < WAIT_S * 1000, 'answered when c came, not at the end of its wait')
    const text = await evicted.text()
    assert.equal(text, `{"data":[],"nextCursor":"${head}"}`, 'empty, with the cursor it came with: ask again')
    assert.equal(await waiting(server), 4)
    await server.store.orders.cancel(1n, null)
    for (const response of held) assert.deepEqual(await eventTypes(await response), ['order.cancelled'])
    await server.close()
  })
})
