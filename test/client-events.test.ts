import assert from 'node:assert/strict'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
// The package's own export, as a user imports it: the built dist/client (npm run build first).
import { createV2Client, PetstoreApiError, type EventsRetry, type OrderEvent, type PetstoreV2Client } from 'petstore-orders/client'

const MAX = 9223372036854775807n

/** Runs `call`, expecting it to reject with a PetstoreApiError of this status and code. */
async function expectApiError(call: Promise<unknown>, status: number, code: string): Promise<PetstoreApiError> {
  const error = await call.then(
    () => assert.fail(`expected ${status} ${code}, the call succeeded`),
    (error: unknown) => error,
  )
  assert.ok(error instanceof PetstoreApiError, `not a PetstoreApiError: ${String(error)}`)
  assert.equal(error.status, status, error.message)
  assert.equal(error.code, code, error.message)
  return error
}

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
  return `{"id":"${id}","type":"${type}","occurredAt":"2026-11-26T19:00:00.000Z","order":{"id":${orderId},"complete":false,"status":"pending","petId":${MAX}}}`
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
  after(() => new Promise<void>((resolve) => server.close(() => resolve())))

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
    assert.equal(stream.cursor, '3')
    assert.deepEqual(requests.map((r) => [r.query.get('after'), r.query.get('limit'), r.query.get('wait')]), [
      ['0', '2', '0'],
      ['2', '2', '0'],
      ['2', '2', '0'],
    ])
    // wait: 0 and an empty page: the next poll is not sent at once (at most one a second).
    assert.ok(requests[2]!.at - requests[1]!.at >= 900, `${requests[2]!.at - requests[1]!.at} ms`)
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

  it('aborting the signal ends the loop without an error, also while a poll is held or a retry waits', async () => {
    reset([page([1n], '1')]) // then the poll for more is held
    const controller = new AbortController()
    const stream = client.events({ signal: controller.signal })
    assert.equal((await stream.next()).value?.id, '1')
    const held = stream.next()
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(requests.length, 2)
    const abortedAt = performance.now()
    controller.abort()
    assert.deepEqual(await held, { done: true, value: undefined })
    assert.ok(performance.now() - abortedAt < 500)
    assert.equal(stream.cursor, '1')

    reset([error(503, 'service_unavailable', { 'retry-after': '30' })])
    const waiting = new AbortController()
    const retrying = client.events({ signal: waiting.signal, onRetry: () => setTimeout(() => waiting.abort(), 50) })
    const started = performance.now()
    assert.deepEqual(await retrying.next(), { done: true, value: undefined })
    assert.ok(performance.now() - started < 5000, 'the 30 s Retry-After wait was cut short')
    assert.equal(requests.length, 1)
  })

  it('break stops it: no request after the loop', async () => {
    reset([page([1n, 2n, 3n], '3')])
    const stream = client.events()
    for await (const event of stream) if (event.id === '2') break
    assert.equal(stream.cursor, '2', 'resume after the last event handled')
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(requests.length, 1)
    assert.deepEqual(await stream.next(), { done: true, value: undefined })
  })
})
