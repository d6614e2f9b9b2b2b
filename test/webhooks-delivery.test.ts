import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { after, describe, it } from 'node:test'
import { Webhook } from 'standardwebhooks'
import type { FeedEvent, WebhookSecrets } from '../src/domain/webhooks.js'
import { BODY_READ_MS, Deliverer, MAX_RESPONSE_BYTES, type DeliveryResult } from '../src/webhooks/delivery.js'
import { afterFailure, nextRetry, parseRetryAfter } from '../src/webhooks/retry-schedule.js'
import { deliveryBody, deliveryHeaders } from '../src/webhooks/signing.js'
import { checkWebhookUrl } from '../src/webhooks/url-policy.js'
import { dnsServer } from './support/dns-server.js'

const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`

const EVENT: FeedEvent = {
  position: 9_007_199_254_740_993n,
  type: 'order.created',
  occurredAt: '2025-01-02T03:04:05.678Z',
  json: '{"id":"9007199254740993","type":"order.created","occurredAt":"2025-01-02T03:04:05.678Z","order":{"id":9007199254740995,"petId":1,"quantity":1,"status":"placed","complete":false}}',
}

interface Received {
  headers: IncomingMessage['headers']
  body: string
  url: string
}

/** A receiver on 127.0.0.1 answering with `handler`, recording what it got. */
async function receiver(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; port: number; received: Received[]; connections: number; server: Server }> {
  const received: Received[] = []
  const state = { connections: 0 }
  const sockets = new Set<Socket>()
  const server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => (body += chunk))
    req.on('end', () => {
      received.push({ headers: req.headers, body, url: req.url ?? '' })
      handler(req, res)
    })
  })
  server.on('connection', (socket) => {
    state.connections++
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  after(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    server,
    get connections() {
      return state.connections
    },
  }
}

function deliverer(options: Partial<ConstructorParameters<typeof Deliverer>[0]> = {}): Deliverer {
  const value = new Deliverer({ timeoutMs: 10_000, allowPrivateNetworks: true, ...options })
  after(() => value.close())
  return value
}

function request(url: string, secrets: WebhookSecrets, now = new Date()): { url: string; body: string; headers: Record<string, string> } {
  const body = deliveryBody(EVENT)
  return { url, body, headers: deliveryHeaders(secrets, EVENT.position.toString(), body, now) }
}

const secrets = (): WebhookSecrets => ({ current: newSecret(), previous: null, previousUntil: null })

describe('signing', () => {
  it('signs a body that standardwebhooks verifies, carrying the feed event exactly', async () => {
    const hook = await receiver((_req, res) => res.end())
    const keys = secrets()
    const result = await deliverer().deliver(request(hook.url, keys))
    assert.equal(result.outcome, 'success')
    const [got] = hook.received
    assert.ok(got)
    assert.equal(got.headers['webhook-id'], '9007199254740993')
    assert.equal(got.headers['content-type'], 'application/json')
    const payload = new Webhook(keys.current).verify(got.body, got.headers as Record<string, string>) as Record<string, unknown>
    assert.equal(payload.type, 'order.created')
    assert.equal(payload.timestamp, EVENT.occurredAt)
    // The ids past 2^53 are the feed's text, not a rounded number.
    assert.equal(got.body, `{"type":"order.created","timestamp":"2025-01-02T03:04:05.678Z","data":${EVENT.json}}`)
    assert.throws(() => new Webhook(newSecret()).verify(got.body, got.headers as Record<string, string>))
  })

  it('signs with both secrets for the day after a rotation, then with the current one only', async () => {
    const hook = await receiver((_req, res) => res.end())
    const now = new Date()
    const rotated: WebhookSecrets = { current: newSecret(), previous: newSecret(), previousUntil: new Date(now.getTime() + 86_400_000).toISOString() }
    assert.equal((await deliverer().deliver(request(hook.url, rotated, now))).outcome, 'success')
    const [got] = hook.received
    assert.ok(got)
    const headers = got.headers as Record<string, string>
    assert.equal(headers['webhook-signature']?.split(' ').length, 2)
    for (const key of [rotated.current, rotated.previous!]) new Webhook(key).verify(got.body, headers)

    const later = new Date(now.getTime() + 86_400_001)
    const single = request(hook.url, rotated, later).headers['webhook-signature']
    assert.equal(single?.split(' ').length, 1)
  })
})

describe('delivery outcomes', () => {
  it('does not follow a redirect: a 3xx is a failure and the target is never asked', async () => {
    const hook = await receiver((req, res) => {
      if (req.url === '/hook') res.writeHead(307, { location: '/elsewhere' }).end()
      else res.end()
    })
    const result = await deliverer().deliver(request(hook.url, secrets()))
    assert.deepEqual(pick(result), { outcome: 'failure', status: 307, error: 'redirect not followed' })
    assert.deepEqual(hook.received.map((got) => got.url), ['/hook'])
  })

  for (const [status, expected] of [
    [200, { outcome: 'success', status: 200, error: null }],
    [204, { outcome: 'success', status: 204, error: null }],
    [400, { outcome: 'failure', status: 400, error: 'status 400' }],
    [500, { outcome: 'failure', status: 500, error: 'status 500' }],
    [410, { outcome: 'gone', status: 410, error: 'gone' }],
  ] as const) {
    it(`takes ${status} as ${expected.outcome}, never keeping the response body`, async () => {
      const hook = await receiver((_req, res) => res.writeHead(status).end('SECRET-BODY-TEXT'))
      const result = await deliverer().deliver(request(hook.url, secrets()))
      assert.deepEqual(pick(result), expected)
      assert.doesNotMatch(JSON.stringify(result), /SECRET-BODY-TEXT/)
    })
  }

  it('passes Retry-After on for 429 and 503 only', async () => {
    for (const [status, header, expected] of [
      [429, '120', '120'],
      [503, 'Wed, 21 Oct 2065 07:28:00 GMT', 'Wed, 21 Oct 2065 07:28:00 GMT'],
      [500, '120', undefined],
    ] as const) {
      const hook = await receiver((_req, res) => res.writeHead(status, { 'retry-after': header }).end())
      const result = await deliverer().deliver(request(hook.url, secrets()))
      assert.equal(result.outcome, 'failure')
      assert.equal(result.retryAfter, expected)
    }
  })

  it('gives up at the timeout, over the whole attempt', async () => {
    const hook = await receiver(() => {}) // never answers
    const result = await deliverer({ timeoutMs: 1000 }).deliver(request(hook.url, secrets()))
    assert.deepEqual(pick(result), { outcome: 'failure', status: null, error: 'timeout' })
    // The error names the timeout as what ended it; it ended no earlier than the timeout.
    assert.ok(result.durationMs >= 990, `took ${result.durationMs} ms`)
  })

  it('reports a refused connection and a reset one', async () => {
    const closed = await receiver(() => {})
    await new Promise((resolve) => closed.server.close(resolve))
    assert.deepEqual(pick(await deliverer().deliver(request(closed.url, secrets()))), { outcome: 'failure', status: null, error: 'connection refused' })

    const reset = await receiver((req) => req.socket.destroy())
    assert.deepEqual(pick(await deliverer().deliver(request(reset.url, secrets()))), { outcome: 'failure', status: null, error: 'connection reset' })
  })

  it('reads at most 64 KB of a response, then drops the connection', async () => {
    for (const status of [200, 500]) {
      let written = 0
      let closedEarly!: () => void
      const dropped = new Promise<void>((resolve) => (closedEarly = resolve))
      const hook = await receiver((_req, res) => {
        res.writeHead(status, { 'content-type': 'text/plain' })
        const chunk = Buffer.alloc(16 * 1024, 'x')
        // Writes until the client drops the connection, at most 64 MB: a body never meant to end.
        const pump = (): void => {
          while (written < 64 * 1024 * 1024 && !res.destroyed) {
            written += chunk.length
            if (!res.write(chunk)) return void res.once('drain', pump)
          }
        }
        res.on('close', () => closedEarly())
        pump()
      })
      const result = await deliverer({ timeoutMs: 60_000 }).deliver(request(hook.url, secrets()))
      assert.equal(result.outcome, status === 200 ? 'success' : 'failure')
      assert.equal(result.status, status)
      await dropped
      assert.ok(written < 64 * 1024 * 1024, 'the receiver wrote its whole body: the connection was not dropped')
      assert.ok(result.durationMs < 60_000)
      assert.ok(MAX_RESPONSE_BYTES === 65_536)
    }
  })

  it('takes a response head of up to 64 KB (Node reads 16 KB by default), and fails a larger one', async () => {
    const header = (size: number) => receiver((_req, res) => res.writeHead(200, { 'x-large': 'a'.repeat(size) }).end())
    assert.deepEqual(pick(await deliverer().deliver(request((await header(60_000)).url, secrets()))), { outcome: 'success', status: 200, error: null })
    assert.deepEqual(pick(await deliverer().deliver(request((await header(70_000)).url, secrets()))), {
      outcome: 'failure',
      status: null,
      error: 'connection failed',
    })
  })

  it('takes the status of a receiver that trickles its body, without waiting for the body to end', async () => {
    for (const status of [200, 503]) {
      let closed!: () => void
      const dropped = new Promise<void>((resolve) => (closed = resolve))
      const hook = await receiver((_req, res) => {
        res.writeHead(status, { 'content-type': 'text/plain' })
        res.write('.')
        const timer = setInterval(() => res.write('.'), 100) // a byte at a time, without end
        res.on('close', () => {
          clearInterval(timer)
          closed()
        })
      })
      const result = await deliverer({ timeoutMs: 60_000 }).deliver(request(hook.url, secrets()))
      assert.deepEqual(pick(result), status === 200 ? { outcome: 'success', status, error: null } : { outcome: 'failure', status, error: `status ${status}` })
      // The body never ends: only the brief read's end (not the minute's timeout) let the attempt finish.
      assert.ok(result.durationMs >= BODY_READ_MS - 10 && result.durationMs < 60_000, `took ${result.durationMs} ms`)
      await dropped // and the connection is dropped rather than kept for the rest of the body
    }
  })

  it('sends one delivery after another over one kept-alive connection', async () => {
    const hook = await receiver((_req, res) => res.end())
    const sender = deliverer()
    for (let i = 0; i < 5; i++) assert.equal((await sender.deliver(request(hook.url, secrets()))).outcome, 'success')
    assert.equal(hook.received.length, 5)
    assert.equal(hook.connections, 1)
  })

  it('is aborted by its signal', async () => {
    const hook = await receiver(() => {})
    const abort = new AbortController()
    const pending = deliverer().deliver(request(hook.url, secrets()), abort.signal)
    setTimeout(() => abort.abort(), 200)
    assert.equal((await pending).outcome, 'aborted')
  })
})

describe('addresses at connect time', () => {
  it('refuses a name that resolves to 127.0.0.1 when connecting, though it passed the check', async () => {
    // "rebind.test" resolves to a public address when the URL is checked and to 127.0.0.1 when the
    // delivery connects, as a rebinding name would. Private networks not allowed.
    const dns = await dnsServer({ 'rebind.test': ['93.184.215.14'] })
    after(() => dns.close())
    const hook = await receiver((_req, res) => res.end())
    const url = `https://rebind.test:${hook.port}/hook`
    assert.equal((await checkWebhookUrl(url, { allowPrivateNetworks: false, dnsServers: [dns.address] })).ok, true)
    dns.set('rebind.test', ['127.0.0.1'])
    const result = await deliverer({ allowPrivateNetworks: false, dnsServers: [dns.address] }).deliver(request(url, secrets()))
    assert.deepEqual(pick(result), { outcome: 'failure', status: null, error: 'address not allowed' })
    assert.equal(hook.connections, 0)
  })

  it('refuses an IP literal that is not allowed, without connecting', async () => {
    const hook = await receiver((_req, res) => res.end())
    const result = await deliverer({ allowPrivateNetworks: false }).deliver(request(`https://127.0.0.1:${hook.port}/hook`, secrets()))
    assert.deepEqual(pick(result), { outcome: 'failure', status: null, error: 'address not allowed' })
    const http = await deliverer({ allowPrivateNetworks: false }).deliver(request(hook.url, secrets()))
    assert.deepEqual(pick(http), { outcome: 'failure', status: null, error: 'URL not allowed' })
    assert.equal(hook.connections, 0)
  })
})

describe('retry schedule', () => {
  const schedule = [5000, 300_000, 1_800_000]

  it('waits delay i ±10% after failure i, then is exhausted', () => {
    for (const [failures, delay] of schedule.entries()) {
      assert.deepEqual(nextRetry(failures, schedule, null, () => 0), { retryInMs: delay * 0.9 })
      assert.deepEqual(nextRetry(failures, schedule, null, () => 0.5), { retryInMs: delay })
      assert.deepEqual(nextRetry(failures, schedule, null, () => 0.999_999_9), { retryInMs: Math.round(delay * 1.1) })
    }
    assert.equal(nextRetry(3, schedule, null), 'exhausted')
    assert.equal(nextRetry(0, [], null), 'exhausted')
  })

  it('never retries sooner than Retry-After', () => {
    assert.deepEqual(nextRetry(0, schedule, 60_000, () => 0.5), { retryInMs: 60_000 })
    assert.deepEqual(nextRetry(1, schedule, 60_000, () => 0.5), { retryInMs: 300_000 })
    assert.equal(nextRetry(3, schedule, 60_000), 'exhausted')
  })

  it('reads Retry-After as seconds or an HTTP date, capped', () => {
    const now = new Date('2025-01-01T00:00:00Z')
    assert.equal(parseRetryAfter('120', now, 86_400_000), 120_000)
    assert.equal(parseRetryAfter(' 0 ', now, 86_400_000), 0)
    assert.equal(parseRetryAfter('Wed, 01 Jan 2025 00:01:30 GMT', now, 86_400_000), 90_000)
    assert.equal(parseRetryAfter('Tue, 31 Dec 2024 00:00:00 GMT', now, 86_400_000), 0)
    assert.equal(parseRetryAfter('99999999', now, 86_400_000), 86_400_000)
    assert.equal(parseRetryAfter('soon', now, 86_400_000), null)
    assert.equal(parseRetryAfter(undefined, now, 86_400_000), null)
  })

  it('after a failure: a retry at the later of the schedule and Retry-After (at most a day on), or disabling past the schedule', () => {
    const now = new Date('2025-01-01T00:00:00Z')
    assert.deepEqual(afterFailure(0, schedule, '3600', now), { retryAt: new Date('2025-01-01T01:00:00Z') })
    assert.deepEqual(afterFailure(2, schedule, '99999999', now), { retryAt: new Date('2025-01-02T00:00:00Z') })
    const scheduled = afterFailure(1, schedule, undefined, now)
    assert.ok('retryAt' in scheduled && Math.abs(scheduled.retryAt.getTime() - now.getTime() - 300_000) <= 30_000, 'delay 1, ±10%')
    assert.deepEqual(afterFailure(3, schedule, '60', now), { disable: 'retries_exhausted' })
  })
})

function pick(result: DeliveryResult): Pick<DeliveryResult, 'outcome' | 'status' | 'error'> {
  return { outcome: result.outcome, status: result.status, error: result.error }
}
