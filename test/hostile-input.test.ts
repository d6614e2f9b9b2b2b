import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import fc from 'fast-check'
import { forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { rawRequest } from './support/raw-http.js'

// Property-based checks: whatever a client sends, the answer is never a 5xx, every error is an Error
// body, and nothing changes. Each property runs against a real server over raw sockets, so bytes
// that an HTTP client library would refuse to send still reach the server.

const RUNS = Number(process.env.PROPERTY_RUNS ?? 150)
const PENDING_ID = 4611686018427400000n // the one pending order; no generator below produces it

interface RawAnswer {
  status: number | undefined // undefined: the server closed the connection without answering
  body: string
}

function parse(raw: string): RawAnswer {
  const match = /^HTTP\/1\.1 (\d{3}) [^\r]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(raw)
  if (match === null) return { status: undefined, body: raw }
  let body = match[3]!
  if (/transfer-encoding: chunked/i.test(match[2]!)) {
    body = body.replace(/(^|\r\n)[0-9a-f]+\r\n/gi, '').replace(/\r\n$/, '')
  }
  return { status: Number(match[1]), body }
}

function assertSafe(answer: RawAnswer, context: string, method = 'GET'): void {
  if (answer.status === undefined) {
    assert.equal(answer.body, '', `${context}: a closed connection must not carry a partial answer`)
    return
  }
  assert.ok(answer.status < 500, `${context}: got ${answer.status} ${answer.body}`)
  if (answer.status >= 400 && method !== 'HEAD') {
    const body = JSON.parse(answer.body) as Record<string, unknown>
    assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status'], context)
    assert.equal(body.status, answer.status, context)
  }
}

function request(method: string, target: string, headers: [string, string][], body = ''): string {
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close']
  for (const [name, value] of headers) lines.push(`${name}: ${value}`)
  if (body !== '') lines.push(`Content-Length: ${Buffer.byteLength(body, 'latin1')}`)
  return `${lines.join('\r\n')}\r\n\r\n${body}`
}

forEachStore('hostile input', (kind) => {
  let server: TestServer
  let key: string
  let versionBefore: bigint

  const send = async (raw: string) => parse(await rawRequest(server.origin, Buffer.from(raw, 'latin1')))

  before(async () => {
    server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_AUTH_FAILURES: '0' } })
    key = await server.createKey()
    await server.importOrders([
      { id: PENDING_ID, status: 'pending' },
      ...Array.from({ length: 20 }, (_, i) => ({ id: BigInt(i + 1), status: 'shipped' as const })),
    ])
    versionBefore = await server.store.orders.dataVersion()
  })

  after(async () => {
    // Nothing any property sent changed the data.
    assert.equal(await server.store.orders.dataVersion(), versionBefore)
  })

  it('any path id: 400, 404 or 409 with an Error body, never a cancel', async () => {
    const id = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
      fc.integer().map(String),
      fc.double().map(String),
    )
    await fc.assert(
      fc.asyncProperty(id, async (value) => {
        if (value === String(PENDING_ID) || /^0*4611686018427400000$/.test(value)) return
        const answer = await send(request('DELETE', `/v1/store/orders/${encodeURIComponent(value)}`, [['Authorization', `Bearer ${key}`]]))
        assertSafe(answer, `id ${JSON.stringify(value)}`)
        assert.notEqual(answer.status, 204)
      }),
      { numRuns: RUNS },
    )
  })

  it('any method on any path: never a 5xx', async () => {
    const method = fc.oneof(
      fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT', 'PROPFIND', 'SEARCH'),
      fc.stringMatching(/^[A-Z]{1,12}$/),
    )
    const path = fc.oneof(
      fc.constantFrom('/v1/store/orders', '/v1/store/orders/1', '/v1/pets/1', '/v1/openapi.json', '/healthz', '/metrics', '/'),
      fc.webPath(),
    )
    await fc.assert(
      fc.asyncProperty(method, path, async (m, p) => {
        // DELETE with a valid key is the one change allowed; aim it at shipped orders only.
        const target = m === 'DELETE' && p === '/v1/store/orders/1' ? '/v1/store/orders/2' : p || '/'
        assertSafe(await send(request(m, target, [['Authorization', `Bearer ${key}`]])), `${m} ${target}`, m)
      }),
      { numRuns: RUNS },
    )
  })

  it('any Authorization header, duplicated, huge or non-ASCII: 4xx or a closed connection, never 200', async () => {
    const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 200 })
    const value = fc.oneof(
      printable,
      printable.map((s) => `Bearer ${s}`),
      printable.map((s) => `bearer pso_${s}`),
      fc.integer({ min: 1, max: 40_000 }).map((n) => `Bearer ${'A'.repeat(n)}`),
      fc.constant(`Bearer ${key}\u00e9`),
      fc.constant(`Bearer  ${key.slice(0, 20)}`),
    )
    await fc.assert(
      fc.asyncProperty(fc.array(value, { minLength: 1, maxLength: 3 }), async (values) => {
        const answer = await send(request('GET', '/v1/store/orders', values.map((v) => ['Authorization', v.trim()])))
        assertSafe(answer, JSON.stringify(values).slice(0, 200))
        assert.notEqual(answer.status, 200)
      }),
      { numRuns: RUNS },
    )
  })

  it('any query string: the list or a 4xx, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 300 }), async (query) => {
        const answer = await send(request('GET', `/v1/store/orders?${encodeURI(query)}`, [['Authorization', `Bearer ${key}`]]))
        assertSafe(answer, `query ${JSON.stringify(query)}`)
      }),
      { numRuns: RUNS },
    )
  })

  it('any body with any content type: a 4xx or the operation, never a 5xx', async () => {
    const contentType = fc.oneof(
      fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', ''),
      fc.string({ maxLength: 40 }),
    )
    const body = fc.oneof(fc.string({ maxLength: 200 }), fc.json(), fc.constant('{"__proto__":{"polluted":true}}'))
    await fc.assert(
      fc.asyncProperty(contentType, body, fc.constantFrom('DELETE', 'GET', 'POST'), async (type, payload, method) => {
        const headers: [string, string][] = [['Authorization', `Bearer ${key}`]]
        if (type !== '') headers.push(['Content-Type', type.replace(/[\r\n]/g, '')])
        const answer = await send(request(method, method === 'DELETE' ? '/v1/store/orders/3' : '/v1/store/orders', headers, payload))
        assertSafe(answer, `${method} ${type} ${JSON.stringify(payload).slice(0, 100)}`)
      }),
      { numRuns: RUNS },
    )
    assert.equal(({} as Record<string, unknown>).polluted, undefined)
  })
})
