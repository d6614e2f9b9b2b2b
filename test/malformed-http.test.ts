import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { before, describe, it } from 'node:test'
import { startTestServer, type TestServer } from './support/harness.js'
import { rawExchange } from './support/raw-http.js'

// Malformed HTTP is answered on the socket, outside Fastify: one response per request, never a
// second one after the first has started, and the connection closed. The store plays no part.

/** The responses in a raw answer: status line and headers of each. */
function responsesIn(raw: string): { status: number; head: string }[] {
  return [...raw.matchAll(/HTTP\/1\.1 (\d{3}) [^\r]*\r\n([\s\S]*?)\r\n\r\n/g)].map((m) => ({ status: Number(m[1]), head: m[2]! }))
}

/**
 * Sends `bytes`; returns the answer and whether the server closed the connection. The server's
 * keep-alive timeout is KEEP_ALIVE_MS here: a connection it kept open would still be open when this
 * side gives up, half of that later; a close at once comes long before on a loaded machine too.
 */
const KEEP_ALIVE_MS = 60_000
function send(server: TestServer, bytes: string): Promise<{ raw: string; closedByServer: boolean }> {
  return rawExchange(server.origin, bytes, KEEP_ALIVE_MS / 2)
}

const CHUNKED_100K = `186a0\r\n${'a'.repeat(100_000)}\r\n`

describe('malformed HTTP', () => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer('sqlite', { env: { HTTP_MAX_HEADER_SIZE: '8192', HTTP_KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_MS) } })
    key = await server.createKey()
  })

  it('gets exactly one response, even when one was already sent on its headers, then the connection closes', async () => {
    const requests = {
      // 415 on the headers (no content type), then a bad chunk size
      'POST, bad chunk': 'POST /v1/store/orders HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n',
      // 401 on the headers, then a bad chunk size
      'DELETE without key, bad chunk': 'DELETE /v1/store/orders/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n',
      '404, bad chunk': 'GET /nope HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n',
      // 405 with Connection: close, then 100 KB that are not chunks
      'TRACE, 100 KB unframed': `TRACE /v1/store/orders HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n${'a'.repeat(100_000)}`,
      // 413 once 16 KiB are read (Connection: close), then a bad chunk after the 100 KB one
      'OPTIONS, 100 KB then a bad chunk': `OPTIONS /v1/store/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${CHUNKED_100K}zz\r\n\r\n`,
      // nothing answered yet: the malformed body gets the 400
      'JSON body, bad chunk': `DELETE /v1/store/orders/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n`,
    }
    for (const [name, bytes] of Object.entries(requests)) {
      const { raw, closedByServer } = await send(server, bytes)
      const responses = responsesIn(raw)
      assert.equal(responses.length, 1, `${name}: ${raw.slice(0, 2000)}`)
      assert.ok(responses[0]!.status >= 400, name)
      assert.ok(closedByServer, `${name}: the server kept the connection open`)
    }
  })

  it('is answered once when a client sends TRACE or OPTIONS with a 100 KB chunked body (Node http client)', async () => {
    for (const method of ['TRACE', 'OPTIONS']) {
      for (const contentType of [undefined, 'application/json']) {
        const status = await new Promise<number>((resolve, reject) => {
          const request = httpRequest(
            `${server.origin}/v1/store/orders`,
            { method, headers: { 'transfer-encoding': 'chunked', ...(contentType ? { 'content-type': contentType } : {}) } },
            (response) => {
              response.resume()
              response.on('end', () => resolve(response.statusCode!))
              response.on('error', reject)
            },
          )
          request.on('error', reject)
          for (let i = 0; i < 100; i++) request.write('a'.repeat(1000))
          request.end()
        })
        assert.ok(status >= 400 && status < 500, `${method} ${contentType}: ${status}`)
      }
    }
  })

  it('answers 400, 408 and 431 with an X-Request-Id, the request\'s own when its headers were read', async () => {
    const cases: [string, string, number][] = [
      ['GARBAGE\r\n\r\n', 'garbage', 400],
      [`GET /v1/store/orders HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(10_000)}\r\n\r\n`, 'oversized headers', 431],
      ['GET /v1/store/orders HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', 'bad header', 400],
    ]
    for (const [bytes, name, status] of cases) {
      const [response] = responsesIn((await send(server, bytes)).raw)
      assert.equal(response?.status, status, name)
      assert.match(response!.head, /^x-request-id: [0-9a-f-]{36}$/im, name)
    }
    // A malformed body of a request whose headers carried an acceptable id: that id.
    const { raw } = await send(
      server,
      `DELETE /v1/store/orders/1 HTTP/1.1\r\nHost: x\r\nX-Request-Id: trace-42.a\r\nAuthorization: Bearer ${key}\r\n` +
        'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n',
    )
    const responses = responsesIn(raw)
    assert.equal(responses.length, 1, raw)
    assert.equal(responses[0]!.status, 400, raw)
    assert.match(responses[0]!.head, /^x-request-id: trace-42\.a$/im)
  })

  it('answers a request that does not arrive in time with 408 and an X-Request-Id', async () => {
    const slow = await startTestServer('sqlite', { env: { HTTP_HEADERS_TIMEOUT_MS: '300', HTTP_REQUEST_TIMEOUT_MS: '300' } })
    const { raw } = await send(slow, 'GET /v1/store/orders HTTP/1.1\r\nHost: x\r\n') // headers never end
    const responses = responsesIn(raw)
    assert.equal(responses.length, 1, raw)
    assert.equal(responses[0]!.status, 408)
    assert.match(responses[0]!.head, /^x-request-id: [0-9a-f-]{36}$/im)
    assert.match(raw, /"code":"request_timeout"/)
  })
})
