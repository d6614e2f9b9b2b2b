import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import pino from 'pino'
import { bearer, startTestServer, within, type TestServer } from './support/harness.js'

interface Line {
  level: number
  reqId?: string
  msg: string
  [field: string]: unknown
}

describe('request logs', () => {
  const lines: Line[] = []
  let server: TestServer
  let key: string

  before(async () => {
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Line) })
    server = await startTestServer('sqlite', { logger })
    key = await server.createKey()
  })

  /** The lines of one request, by its id (answered in X-Request-Id). */
  async function linesOf(response: Response): Promise<Line[]> {
    await response.arrayBuffer()
    const id = response.headers.get('x-request-id')!
    // The access line is written once the response has been sent: give it a moment.
    await within(15_000, 'the access line', () => lines.some((line) => line.reqId === id && line.msg === 'request'))
    return lines.filter((line) => line.reqId === id)
  }

  it('writes one access line per request, with its id, method, path, status and duration', async () => {
    const response = await fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'x-request-id': 'trace-42' } })
    assert.equal(response.status, 200)
    const [line, ...others] = await linesOf(response)
    assert.deepEqual(others, [])
    assert.deepEqual({ ...line, time: 0, pid: 0, hostname: '', ms: 0 }, {
      level: 30,
      time: 0,
      pid: 0,
      hostname: '',
      reqId: 'trace-42',
      method: 'GET',
      url: '/v1/store/orders',
      status: 200,
      ms: 0,
      msg: 'request',
    })
    assert.equal(typeof line!.ms, 'number')
  })

  it("tags what a request logs besides its access line with the request's id", async () => {
    const response = await fetch(`${server.origin}/v1/store/orders`, { headers: { authorization: 'Bearer nope' } })
    assert.equal(response.status, 401)
    const logged = await linesOf(response)
    assert.deepEqual(
      logged.map((line) => [line.msg, line.code ?? line.status]),
      [
        ['request refused', 'unauthorized'],
        ['request', 401],
      ],
    )
  })

  it('never logs a key', () => {
    assert.ok(lines.length > 0)
    assert.ok(!JSON.stringify(lines).includes(key))
  })
})
