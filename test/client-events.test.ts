import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
// The client's workspace package, as a user imports it: its built dist (npm run build first).
import { createV2Client, PetstoreApiError, type EventsRetry, type OrderEvent, type PetstoreV2Client } from '@petstore-orders/client'
import { generateApiKey, SCOPES } from '../src/domain/api-keys.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, forEachStore, order, records, startTestServer, within, type TestServer } from './support/harness.js'
import { expectApiError } from './support/client.js'
import { BIN, freePort, type ServerProcess } from './support/server-process.js'

const MAX = 9223372036854775807n


/** Every event of the stream until `count` have come, or fails after `ms`. */
async function take(stream: AsyncIterableIterator<OrderEvent>, count: number, ms = 20_000): Promise<OrderEvent[]> {
  const events: OrderEvent[] = []
  if (count === 0) return events
  const timer = setTimeout(() => void stream.return?.(), ms)
  try {
    for await (const event of { [Symbol.asyncIterator]: () => stream }) {
      events.push(event)
      if (events.length === count) break
    }
  } finally {
    clearTimeout(timer)
  }
  assert.equal(events.length, count, `${events.length} of ${count} events within ${ms} ms`)
  return events
}

// ---- the retry rules, against a scripted HTTP server ----
// A real server cannot be made to answer 429 with a chosen Retry-After, a proxy's 502 page or a
// reset in the middle of a response on cue; this one answers each request as its script says.

type Step = (request: IncomingMessage, response: ServerResponse) => void

function eventJson(id: bigint, orderId: bigint, type = 'order.created'): string {
  return `{"id":"${id}","type":"${type}","occurredAt":"2026-11-26T19:00:00.000Z","order":{"id":${orderId},"complete":false,"status":"pending","version":1,"petId":${MAX}}}`
}

function page(ids: bigint[], nextCursor: string): Step {
  return (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
    response.end(`{"data":[${ids.map((id) => eventJson(id, MAX - id)).join(',')}],"nextCursor":"${nextCursor}"}`)
  }
}

function error(status: number, code: string, headers: Record<string, string> = {}): Step {
  return (_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json', ...headers })
    response.end(JSON.stringify({ code, message: `scripted ${code}`, status }))
  }
}

describe('client.events(): retries and errors, against a scripted server', () => {
  let server: Server
  let script: Step[] = []
  /** The query of every request, in order, with the time it arrived. */
  let requests: { query: URLSearchParams; at: number }[] = []
  let client: PetstoreV2Client

  before(async () => {
    server = createServer((request, response) => {
      const url = new URL(request.url!, 'http://localhost')
      assert.equal(url.pathname, '/v2/store/order-events')
      assert.equal(request.headers.authorization, 'Bearer pso_test')
      requests.push({ query: url.searchParams, at: performance.now() })
      const step = script.shift()
      if (step === undefined) {
        // Beyond the script: hold the poll as a real server does, until the client gives up.
        request.once('close', () => response.destroy())
        return
      }
      step(request, response)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    client = createV2Client({ baseUrl: `http://127.0.0.1:${port}/v2`, apiKey: 'pso_test' })
  })
  after(() => {
    server.closeAllConnections() // the client's kept-alive sockets
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })

  function reset(steps: Step[]): void {
    script = steps
    requests = []
  }

  it('follows nextCursor from page to page; ids and order ids exact; an empty page moves the cursor too', async () => {
    reset([page([1n, 2n], '2'), page([], '2'), page([3n], '3')])
    const stream = client.events({ after: 0n, limit: 2, wait: 0 })
    assert.equal(stream.cursor, '0')
    const events = await take(stream, 3)
    assert.deepEqual(events.map((event) => event.id), ['1', '2', '3'])
    assert.equal(events[0]!.order.id, MAX - 1n)
    assert.equal(events[0]!.order.petId, MAX)
    assert.equal(events[0]!.type, 'order.created')
    assert.equal(stream.cursor, '2', 'event 3 is yielded, not yet handled')
    assert.deepEqual(requests.map((r) => [r.query.get('after'), r.query.get('limit'), r.query.get('wait')]), [
      ['0', '2', '0'],
      ['2', '2', '0'],
      ['2', '2', '0'],
    ])
    // wait: 0 and an empty page: the next poll is not sent at once (at most one a second, counted
    // from when the empty one was sent). That was after the first page was answered, as it arrived:
    // the gap between two arrivals would also count the empty poll's way to the server, which a
    // loaded machine can make long (865 ms between arrivals once).
    assert.ok(requests[2]!.at - requests[0]!.at >= 990, `${requests[2]!.at - requests[0]!.at} ms`)
  })

  it('503, 429 (after their Retry-After), a proxy\'s 502 page and a reset connection are retried from the same cursor', async () => {
    const reset503: Step = (request) => request.socket.destroy()
    const proxy502: Step = (_request, response) => {
      response.writeHead(502, { 'content-type': 'text/html' })
      response.end('<html>Bad Gateway</html>')
    }
    const cutMidBody: Step = (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' })
      response.write('{"data":[')
      setTimeout(() => response.socket?.destroy(), 20)
    }
    reset([
      page([5n], '5'),
      error(503, 'service_unavailable', { 'retry-after': '1' }),
      reset503,
      error(429, 'rate_limited', { 'retry-after': '1' }),
      proxy502,
      cutMidBody,
      page([6n, 7n], '7'),
    ])
    const retries: EventsRetry[] = []
    const stream = client.events({ after: '4', onRetry: (retry) => retries.push(retry) })
    const events = await take(stream, 3)
    assert.deepEqual(events.map((event) => event.id), ['5', '6', '7'])
    assert.deepEqual(requests.map((r) => r.query.get('after')), ['4', '5', '5', '5', '5', '5', '5'])
    assert.equal(requests[0]!.query.get('wait'), '20', 'a long poll by default')
    assert.deepEqual(retries.map((retry) => [retry.attempt, retry.cursor]), [[1, '5'], [2, '5'], [3, '5'], [4, '5'], [5, '5']])
    const [unavailable, refused, limited, gateway, cut] = retries.map((retry) => retry.error)
    assert.ok(unavailable instanceof PetstoreApiError && unavailable.code === 'service_unavailable')
    assert.ok(limited instanceof PetstoreApiError && limited.code === 'rate_limited')
    assert.ok(gateway instanceof PetstoreApiError && gateway.status === 502 && gateway.code === 'unexpected_response')
    assert.ok(!(refused instanceof PetstoreApiError) && !(cut instanceof PetstoreApiError))
    assert.equal(retries[0]!.delayMs, 1000)
    assert.equal(retries[2]!.delayMs, 1000)
    // Retry-After is honoured: the request after each 1 s Retry-After came at least 1 s later.
    assert.ok(requests[2]!.at - requests[1]!.at >= 990, `${requests[2]!.at - requests[1]!.at} ms after the 503`)
    assert.ok(requests[4]!.at - requests[3]!.at >= 990, `${requests[4]!.at - requests[3]!.at} ms after the 429`)
    // Without Retry-After, a short backoff that grows.
    assert.ok(retries[1]!.delayMs >= 50 && retries[1]!.delayMs <= 200, String(retries[1]!.delayMs))
    assert.ok(retries[4]!.delayMs >= retries[3]!.delayMs / 2 && retries[4]!.delayMs <= 1600, String(retries[4]!.delayMs))
  })

  it('other errors end the loop with a PetstoreApiError carrying the Error body: 400, 401, 403, 410, 500', async () => {
    for (const [status, code] of [[400, 'invalid_cursor'], [401, 'unauthorized'], [403, 'insufficient_scope'], [410, 'events_expired'], [500, 'internal_error']] as const) {
      reset([error(status, code)])
      const failure = await expectApiError(client.events({ after: '9' }).next(), status, code)
      assert.equal(failure.message, `scripted ${code}`)
      assert.equal(requests.length, 1, `${status} is not retried`)
    }
    reset([page([1n], '1'), (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(`{"data":[${eventJson(2n, 2n, 'order.deleted')}],"nextCursor":"2"}`)
    }])
    const stream = client.events()
    assert.equal((await stream.next()).value?.id, '1')
    const unknownType = await expectApiError(stream.next(), 200, 'unexpected_response')
    assert.match(unknownType.message, /event 0: type/)
    assert.equal(stream.cursor, '1', 'the cursor stays after the last event yielded')
    reset([(_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end('{"data":[]}')
    }])
    await expectApiError(client.events().next(), 200, 'unexpected_response') // nextCursor is always present
    assert.throws(() => client.events({ after: 5 as unknown as bigint }), TypeError)
    assert.throws(() => client.events({ wait: Number.NaN }), TypeError)
  })

  it('onRetry may give up: its error ends the loop', async () => {
    reset([error(503, 'service_unavailable', { 'retry-after': '1' })])
    const stream = client.events({ onRetry: (retry) => {
      throw new Error(`giving up on ${(retry.error as PetstoreApiError).code}`)
    } })
    await assert.rejects(stream.next(), /giving up on service_unavailable/)
  })

  it('a long poll held past the client\'s timeoutMs is not cut by it: its own bound is its wait', async () => {
    const held: Step = (request, response) => {
      const timer = setTimeout(() => page([7n], '7')(request, response), 400)
      request.once('close', () => clearTimeout(timer))
    }
    reset([held])
    const { port } = server.address() as AddressInfo
    const impatient = createV2Client({ baseUrl: `http://127.0.0.1:${port}/v2`, apiKey: 'pso_test', timeoutMs: 50 })
    // A poll cut by timeoutMs would be retried: here that ends the loop with its error instead.
    const onRetry = (retry: EventsRetry): never => {
      throw retry.error
    }
    const [event] = await take(impatient.events({ wait: 1, onRetry }), 1)
    assert.equal(event!.id, '7')
    assert.equal(requests.length, 1)
  })

  it('aborting the signal ends the loop without an error, also while a poll is held or a retry waits', async () => {
    reset([page([1n], '1')]) // then the poll for more is held
    const controller = new AbortController()
    const stream = client.events({ signal: controller.signal })
    assert.equal((await stream.next()).value?.id, '1')
    const held = stream.next()
    await within(15_000, 'the poll is held', () => requests.length === 2)
    controller.abort()
    // The scripted server holds the poll until the client gives up: that it ends at all, it was cut short.
    assert.deepEqual(await held, { done: true, value: undefined })
    assert.equal(stream.cursor, '1')

    reset([error(503, 'service_unavailable', { 'retry-after': '30' })])
    const waiting = new AbortController()
    const retrying = client.events({ signal: waiting.signal, onRetry: () => setTimeout(() => waiting.abort(), 50) })
    const started = performance.now()
    assert.deepEqual(await retrying.next(), { done: true, value: undefined })
    assert.ok(performance.now() - started < 30_000, 'the 30 s Retry-After wait was cut short')
    assert.equal(requests.length, 1)
  })

  it('aborting in the middle of a page yields no further event of it', async () => {
    reset([page([1n, 2n, 3n], '3')])
    const controller = new AbortController()
    const stream = client.events({ signal: controller.signal })
    assert.equal((await stream.next()).value?.id, '1')
    controller.abort()
    assert.deepEqual(await stream.next(), { done: true, value: undefined })
    assert.equal(stream.cursor, '1')
    assert.equal(requests.length, 1)
  })

  it('break stops it: no request after the loop', async () => {
    reset([page([1n, 2n, 3n], '3')])
    const stream = client.events()
    for await (const event of stream) if (event.id === '2') break
    assert.equal(stream.cursor, '1', 'the event the loop stopped on is not counted: resuming delivers it again')
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(requests.length, 1)
    assert.deepEqual(await stream.next(), { done: true, value: undefined })
  })
})

// ---- against a real server, on both stores ----

const TWO_53 = 2n ** 53n

/** `count` pending orders from `first` on, every other one with an id past 2^53. */
function orders(first: number, count: number): ReturnType<typeof order>[] {
  return Array.from({ length: count }, (_, i) => {
    const n = BigInt(first + i)
    return order({ id: i % 2 === 0 ? n : TWO_53 + n, petId: MAX - n, quantity: 1 + (i % 3), status: 'pending' })
  })
}

/** Positions as numbers are compared as bigints: the ids of events must strictly ascend. */
function assertAscending(events: OrderEvent[]): void {
  for (let i = 1; i < events.length; i++) {
    assert.ok(BigInt(events[i]!.id) > BigInt(events[i - 1]!.id), `event ${events[i]!.id} after ${events[i - 1]!.id}`)
  }
}

forEachStore('client.events() against a real server', (kind) => {
  let server: TestServer
  let client: PetstoreV2Client
  let requested: URL[] = []

  before(async () => {
    server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })
    const counting: typeof fetch = (input, init) => {
      requested.push(new URL(String(input)))
      return fetch(input, init)
    }
    client = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey(), fetch: counting })
  })

  it('follows the feed across pages: every change once, in commit order, each order as it was after the change', async () => {
    await server.importOrders(orders(1, 250))
    await server.store.orders.ship(3n)
    const cancelled = await client.cancelOrder(TWO_53 + 2n, { reason: 'out_of_stock' })
    requested = []
    const events = await take(client.events({ limit: 100, wait: 0 }), 252)
    assert.equal(requested.length, 3, 'one request a page of 100, following nextCursor')
    assert.deepEqual(requested.map((url) => url.searchParams.has('after')), [false, true, true])
    assertAscending(events)
    assert.deepEqual(events.slice(0, 250).map((event) => [event.type, event.order.id]), orders(1, 250).map((o) => ['order.created', o.id]))
    assert.equal(events[0]!.order.petId, MAX - 1n)
    assert.equal(events[0]!.order.status, 'pending')
    const [shipped, cancel] = events.slice(250)
    assert.deepEqual([shipped!.type, shipped!.order.id, shipped!.order.status], ['order.shipped', 3n, 'shipped'])
    assert.deepEqual([cancel!.type, cancel!.order], ['order.cancelled', cancelled])
    for (const event of events) assert.match(event.occurredAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)

    // Any event's id resumes right after it.
    const resumed = await take(client.events({ after: events[99]!.id, wait: 0 }), 152)
    assert.deepEqual(resumed.map((event) => event.id), events.slice(100).map((event) => event.id))
    const fromBigint = await take(client.events({ after: BigInt(events[250]!.id), wait: 0 }), 1)
    assert.equal(fromBigint[0]!.id, events[251]!.id)
  })

  it('long poll: a held request answers a new event when it commits, not at the end of its wait', async () => {
    const all = await take(client.events({ limit: 1000, wait: 0 }), 252)
    const stream = client.events({ after: all.at(-1)!.id, wait: 30 })
    requested = []
    const sent = performance.now()
    const next = stream.next()
    // The poll is held: nothing follows the cursor.
    await within(10_000, 'the poll held', async () => /^order_events_waiting 1$/m.test(await (await fetch(`${server.origin}/metrics`)).text()))
    assert.equal(requested.length, 1)
    await server.importOrders([order({ id: 10_000n, status: 'shipped', complete: true })])
    const committedAt = performance.now()
    const { value } = await next
    // The server answers a held poll at the end of its wait (30 s after it was sent) if nothing wakes it.
    assert.ok(performance.now() - sent < 30_000, `woken ${(performance.now() - committedAt).toFixed(0)} ms after the commit, not at the end of the wait`)
    assert.deepEqual([value?.type, value?.order.id, value?.order.status, value?.order.complete], ['order.created', 10_000n, 'shipped', true])
    assert.equal(requested.length, 1, 'the held request answered it')
    assert.equal(stream.cursor, all.at(-1)!.id, 'not past the event until the loop asks for the next one')
    await stream.return?.()
  })

  it('typed errors: 400 invalid_cursor, 410 events_expired, 401, 403', async () => {
    await expectApiError(client.events({ after: 'not-a-cursor' }).next(), 400, 'invalid_cursor')
    await expectApiError(client.events({ after: String(MAX) }).next(), 400, 'invalid_cursor') // past the end
    const unknownKey = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: 'pso_0000000000000000000000000000000000000000' })
    await expectApiError(unknownKey.events().next(), 401, 'unauthorized')
    const cancelOnly = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: await server.createKey({ scopes: ['orders:cancel'] }) })
    await expectApiError(cancelOnly.events().next(), 403, 'insufficient_scope')

    // Retention deletes the oldest events: a cursor before what is kept has lost events.
    const [first] = await take(client.events({ wait: 0 }), 1)
    await sleep(20)
    const cut = new Date()
    await sleep(20)
    while ((await server.store.events.prune(cut)) > 0);
    await server.importOrders([order({ id: 10_001n })])
    const expired = await expectApiError(client.events({ after: first!.id }).next(), 410, 'events_expired')
    assert.match(expired.message, /.+/)
    const [oldest] = await take(client.events({ wait: 0 }), 1)
    assert.equal(oldest!.order.id, 10_001n, 'without after: from the oldest retained')
  })
})

/** `petstore-orders serve` on this port (the same one again after a restart); resolves once /healthz answers. */
async function serveOn(databaseUrl: string, port: number): Promise<ServerProcess> {
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), LOG_LEVEL: 'warn', RATE_LIMIT_PER_KEY: '0', SHUTDOWN_TIMEOUT_MS: '2000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  const origin = `http://127.0.0.1:${port}`
  await within(15_000, `the server on port ${port} starts`, async () => {
    if (child.exitCode !== null) assert.fail(`the server exited at start: ${output}`)
    return fetch(`${origin}/healthz`).then((response) => response.ok, () => false)
  }, 50)
  return { child, origin, output: () => output, exited }
}

forEachStore('client.events() across a server restart', (kind) => {
  let store: Store
  const cleanups: (() => Promise<void>)[] = []
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  })

  it('the iterator goes on from its cursor once the server is back: no event twice, none missed', async () => {
    const database = await createDatabase(kind)
    store = await openStore(database.config)
    cleanups.push(async () => {
      await store.close()
      await database.dispose()
    })
    await store.migrate()
    const key = generateApiKey()
    await store.apiKeys.create({ name: 'test', hash: key.hash, displayPrefix: key.displayPrefix, scopes: [...SCOPES], expiresAt: null })
    const port = await freePort()
    let server = await serveOn(database.url, port)
    cleanups.push(async () => {
      server.child.kill('SIGKILL')
      await server.exited
    })

    const controller = new AbortController()
    const retries: EventsRetry[] = []
    const client = createV2Client({ baseUrl: `${server.origin}/v2`, apiKey: key.secret })
    const seen: OrderEvent[] = []
    const following = (async () => {
      for await (const event of client.events({ limit: 20, wait: 5, signal: controller.signal, onRetry: (retry) => retries.push(retry) })) seen.push(event)
    })()

    await store.orders.import(records(orders(1, 50)))
    await within(10_000, '50 events before the restart', () => seen.length === 50)

    server.child.kill('SIGTERM') // stopped while a poll is held
    assert.equal((await server.exited).code, 0, server.output())
    // Changes while the server is away: they are in the feed when it is back.
    for (let id = 1n; id <= 10n; id++) await store.orders.ship(id % 2n === 1n ? id : TWO_53 + id)
    await store.orders.cancel(11n, null, 'duplicate')
    await within(10_000, 'a retry while the server is down', () => retries.length > 0)
    server = await serveOn(database.url, port)
    await store.orders.import(records(orders(100, 5)))

    await within(15_000, 'every event after the restart', () => seen.length >= 66)
    await sleep(200) // and nothing more
    controller.abort()
    await following // ends without an error

    assert.equal(seen.length, 66)
    assertAscending(seen)
    const everything = await take(client.events({ limit: 1000, wait: 0 }), 66)
    assert.deepEqual(seen, everything, 'the events of one walk from the start')
    assert.deepEqual(seen.map((event) => event.type), [
      ...Array<string>(50).fill('order.created'),
      ...Array<string>(10).fill('order.shipped'),
      'order.cancelled',
      ...Array<string>(5).fill('order.created'),
    ])
    assert.ok(retries.every((retry) => retry.cursor === seen[49]!.id), 'each retry resumes from the last event before the stop')
  })
})
