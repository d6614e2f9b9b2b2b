import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import pino from 'pino'
import { MAX_ECHOED_CHARS, shorten } from '../src/http/shorten.js'
import { bearer, startTestServer, within, type TestServer } from './support/harness.js'

interface Line {
  reqId?: string
  msg: string
  [field: string]: unknown
}

describe('shorten', () => {
  it('leaves a value of up to 64 characters as it is', () => {
    assert.equal(shorten(''), '')
    assert.equal(shorten('a'.repeat(MAX_ECHOED_CHARS)), 'a'.repeat(MAX_ECHOED_CHARS))
  })

  it('cuts a longer one to 64 characters and marks the cut', () => {
    assert.equal(shorten('a'.repeat(MAX_ECHOED_CHARS + 1)), `${'a'.repeat(MAX_ECHOED_CHARS)}…`)
    assert.equal(shorten('b'.repeat(15_000)), `${'b'.repeat(MAX_ECHOED_CHARS)}…`)
  })

  it('never splits a character in two', () => {
    const value = `${'a'.repeat(MAX_ECHOED_CHARS - 1)}🐕🐕`
    assert.equal(shorten(value), `${'a'.repeat(MAX_ECHOED_CHARS - 1)}…`)
  })
})

// A client's long value, wherever it goes in a request, comes back in the Error body and goes to
// the log cut to 64 characters: never whole.
describe('a long client value in an error message or a log line', () => {
  const lines: Line[] = []
  let server: TestServer
  let key: string
  const LONG = 3_000 // fits in the URL (at most 4,096 characters) and in the headers

  before(async () => {
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Line) })
    server = await startTestServer('sqlite', { logger })
    key = await server.createKey()
    await server.importOrders([{ id: 1n }])
  })

  /** The answer and the log lines of one request, asserting that neither holds `letter` more than 64 times in a row. */
  async function assertCut(response: Response, status: number, letter: string, last = 'request'): Promise<{ message: string; logged: Line[] }> {
    const text = await response.text()
    assert.equal(response.status, status, text)
    const id = response.headers.get('x-request-id')!
    await within(10_000, `the line "${last}"`, () => lines.some((line) => line.reqId === id && line.msg === last))
    const logged = lines.filter((line) => line.reqId === id)
    const tooLong = new RegExp(`${letter}{${MAX_ECHOED_CHARS + 1}}`)
    assert.ok(text.length < 500, `a ${text.length}-byte Error body: ${text.slice(0, 300)}`)
    assert.doesNotMatch(text, tooLong)
    for (const line of logged) assert.doesNotMatch(JSON.stringify(line), tooLong, `logged: ${JSON.stringify(line).slice(0, 300)}`)
    return { message: (JSON.parse(text) as { message: string }).message, logged }
  }

  const cancel = (body: string, headers: Record<string, string> = { 'content-type': 'application/json' }): Promise<Response> =>
    fetch(`${server.origin}/v2/store/orders/1/cancel`, { method: 'POST', headers: { ...bearer(key), ...headers }, body })

  it("the cancel's reason: 15,000 characters are answered and logged as 64 and a mark", async () => {
    const { message, logged } = await assertCut(await cancel(JSON.stringify({ reason: 'x'.repeat(15_000) })), 400, 'x')
    assert.ok(message.includes(`"${'x'.repeat(MAX_ECHOED_CHARS - 1)}…`), message)
    assert.ok(logged.some((line) => line.msg === 'request refused' && String(line.reason).includes('…')))
    assert.equal((await server.store.orders.find(1n))?.status, 'pending') // nothing changed
  })

  it('an unknown field of the body', async () => {
    const { message } = await assertCut(await cancel(JSON.stringify({ ['y'.repeat(15_000)]: 'other' })), 400, 'y')
    assert.match(message, /^Unknown field "y{64}…" in the body/)
  })

  it('an unknown query parameter, and the URL in the access line', async () => {
    const response = await fetch(`${server.origin}/v2/store/orders?${'z'.repeat(LONG)}=1`, { headers: bearer(key) })
    const { message, logged } = await assertCut(response, 400, 'z')
    assert.match(message, /^Unknown query parameter "z{64}…"/)
    assert.ok(logged.some((line) => line.msg === 'request' && String(line.url).endsWith('…')))
  })

  it('a header Fastify refuses (an unsupported Content-Type)', async () => {
    const { logged } = await assertCut(await cancel('{}', { 'content-type': `application/${'q'.repeat(LONG)}` }), 415, 'q')
    assert.ok(logged.some((line) => line.msg === 'request refused'))
  })

  it('a URL Fastify refuses (bad percent-encoding)', async () => {
    const response = await fetch(`${server.origin}/v2/store/orders/%zz${'w'.repeat(LONG)}`, { headers: bearer(key) })
    // Refused before routing: its one line is the refusal (no access line follows).
    await assertCut(response, 400, 'w', 'request refused')
  })

  it('an order id that is not an int64', async () => {
    await assertCut(await fetch(`${server.origin}/v2/store/orders/${'9'.repeat(200)}`, { headers: bearer(key) }), 400, '9')
  })
})
