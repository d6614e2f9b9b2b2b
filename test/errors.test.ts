import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import Database from 'better-sqlite3'
import pg from 'pg'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { parseRawResponse, rawRequest } from './support/raw-http.js'

function expectRawError(raw: string, status: number, code: string): void {
  const { status: actual, body } = parseRawResponse(raw)
  assert.equal(actual, status, raw)
  assert.deepEqual(Object.keys(body as object).sort(), ['code', 'message', 'status'])
  assert.equal((body as { code: string }).code, code)
  assert.equal((body as { status: number }).status, status)
}

forEachStore('errors', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind, { env: { HTTP_MAX_HEADER_SIZE: '12288' } })
    key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: 2n }, { id: 3n }])
  })

  it('answers unknown paths with 404 not_found, authenticated or not', async () => {
    for (const path of ['/', '/v1', '/v3/store/orders', '/v2/store', '/v1/store/orders/1/items', '/v1/store', '/v1/pets']) {
      await expectError(await fetch(`${server.origin}${path}`), 404, 'not_found')
      await expectError(await fetch(`${server.origin}${path}`, { headers: bearer(key) }), 404, 'not_found')
    }
  })

  it('answers a known path with the wrong method with 405 and Allow', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const response = await fetch(`${server.origin}/v1/store/orders`, { method, headers: bearer(key) })
      assert.equal(response.headers.get('allow'), 'GET, HEAD, OPTIONS')
      await expectError(response, 405, 'method_not_allowed')
    }
    for (const method of ['GET', 'POST', 'PUT']) {
      const response = await fetch(`${server.origin}/v1/store/orders/1`, { method, headers: bearer(key) })
      assert.equal(response.headers.get('allow'), 'DELETE, OPTIONS')
      await expectError(response, 405, 'method_not_allowed')
    }
    const options = await fetch(`${server.origin}/v1/store/orders/1`, { method: 'OPTIONS' })
    assert.equal(options.status, 204)
    assert.equal(options.headers.get('allow'), 'DELETE, OPTIONS')
  })

  it('answers a wrong method with 405 and Allow whatever its body or media type, before any key is asked for', async () => {
    const cases: [string, string, string, Record<string, string>, string][] = [
      ['PUT', '/v2/store/orders/1', 'GET, HEAD, PATCH, OPTIONS', { 'content-type': 'application/merge-patch+json' }, '{}'],
      ['PATCH', '/v2/store/orders', 'GET, HEAD, POST, OPTIONS', { 'content-type': 'application/merge-patch+json' }, '{}'],
      ['PATCH', '/v1/store/orders/1', 'DELETE, OPTIONS', { 'content-type': 'application/merge-patch+json' }, '{}'],
      ['PUT', '/v1/store/orders/1', 'DELETE, OPTIONS', { 'content-type': 'text/xml' }, '<order/>'],
      ['PUT', '/v1/store/orders/1', 'DELETE, OPTIONS', { 'content-type': 'application/json' }, '{"broken'],
    ]
    for (const [method, path, allow, headers, body] of cases) {
      for (const auth of [{}, bearer(key)]) {
        const response = await fetch(`${server.origin}${path}`, { method, headers: { ...headers, ...auth }, body })
        assert.equal(response.headers.get('allow'), allow, `${method} ${path} ${headers['content-type']}`)
        await expectError(response, 405, 'method_not_allowed')
      }
    }
    // The ops endpoints as well.
    for (const path of ['/metrics', '/healthz', '/readyz']) {
      const options = await fetch(`${server.origin}${path}`, { method: 'OPTIONS' })
      assert.deepEqual([options.status, options.headers.get('allow')], [204, 'GET, HEAD, OPTIONS'], path)
      const post = await fetch(`${server.origin}${path}`, { method: 'POST' })
      assert.equal(post.headers.get('allow'), 'GET, HEAD, OPTIONS', path)
      await expectError(post, 405, 'method_not_allowed')
    }
  })

  it('answers bad percent-encoding in a v2 query string with 400 bad_request, after the key and its scopes, before a parameter is read; v1 ignores it', async () => {
    for (const query of ['metadata[p]=%FF', 'metadata[p]=%', 'metadata[p]=%ZZ', 'status=%E0%A4%A', 'limit=1&x=%C3']) {
      const response = await fetch(`${server.origin}/v2/store/orders?${query}`, { headers: bearer(key) })
      const body = await expectError(response, 400, 'bad_request')
      assert.match(body.message as string, /query string has bad percent-encoding/, query)
    }
    // Well-formed escapes are read as ever: %25FF is the text "%FF", %C3%A9 is "é".
    for (const query of ['metadata[p]=%25FF', 'metadata[p]=caf%C3%A9']) {
      const response = await fetch(`${server.origin}/v2/store/orders?${query}`, { headers: bearer(key) })
      assert.equal(response.status, 200, query)
    }
    // Checked where the parameters are, after the key and its scopes (the order of checks: 401, 403 first).
    const manageOnly = await server.createKey({ scopes: ['webhooks:manage'] })
    const moved = await fetch(`${server.origin}/v2/webhook-endpoints/1?x=%FF`, {
      method: 'PATCH',
      headers: { ...bearer(manageOnly), 'content-type': 'application/json' },
      body: '{"url": "https://example.com/hook"}',
    })
    await expectError(moved, 403, 'insufficient_scope')
    await expectError(await fetch(`${server.origin}/v2/store/orders?metadata[p]=%FF`), 401, 'unauthorized')
    // v1 reads no query string and ignores it, a malformed one too, as it always has.
    const v1 = await fetch(`${server.origin}/v1/store/orders?x=%FF`, { headers: bearer(key) })
    assert.equal(v1.status, 200)
    assert.equal(await v1.text(), await (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).text())
  })

  it('answers a path whose parameter is empty (a trailing slash) with 404, whatever the method', async () => {
    for (const path of ['/v1/store/orders/', '/v1/pets/', '/docs/assets/']) {
      for (const method of ['GET', 'HEAD', 'DELETE', 'POST', 'PUT', 'OPTIONS']) {
        for (const headers of [{}, bearer(key)]) {
          const response = await fetch(`${server.origin}${path}`, { method, headers })
          assert.equal(response.headers.get('allow'), null, `${method} ${path}`)
          if (method === 'HEAD') assert.equal(response.status, 404, `${method} ${path}`)
          else await expectError(response, 404, 'not_found')
        }
      }
    }
  })

  it('answers bad percent-encoding with 400 bad_request', async () => {
    const raw = await rawRequest(server.origin, 'GET /v1/store/orders/%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    expectRawError(raw, 400, 'bad_request')
  })

  it('answers an oversized URL with 414 uri_too_long', async () => {
    await expectError(await fetch(`${server.origin}/v1/store/orders?${'a'.repeat(9000)}`, { headers: bearer(key) }), 414, 'uri_too_long')
  })

  it('answers oversized headers with 431 and closes the connection', async () => {
    const raw = await rawRequest(server.origin, `GET /v1/store/orders HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(13_000)}\r\n\r\n`)
    expectRawError(raw, 431, 'headers_too_large')
    assert.match(raw, /connection: close/i)
  })

  it('answers malformed HTTP with 400 bad_request', async () => {
    for (const request of [
      'GARBAGE\r\n\r\n',
      'GET /v1/store/orders HTTP/9.9\r\nHost: x\r\n\r\n',
      'GET /v1/store/orders HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'DELETE /v1/store/orders/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n',
      'GET /v1/store/orders HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
    ]) {
      const raw = await rawRequest(server.origin, request)
      // One response per request: a request its headers already refuse (401: no key) may get that
      // answer instead, and then nothing more (test/malformed-http.test.ts).
      const responses = raw.split(/(?=HTTP\/1\.1 \d{3} )/)
      assert.equal(responses.length, 1, raw)
      if (/^HTTP\/1\.1 401 /.test(raw)) expectRawError(raw, 401, 'unauthorized')
      else expectRawError(raw, 400, 'bad_request')
    }
  })

  it('answers an unsupported body content type with 415, changing nothing', async () => {
    const response = await fetch(`${server.origin}/v1/store/orders/1`, {
      method: 'DELETE',
      headers: { ...bearer(key), 'content-type': 'application/xml' },
      body: '<order/>',
    })
    await expectError(response, 415, 'unsupported_media_type')
    // text/plain too, which Fastify itself would read as a string.
    for (const type of ['text/plain', 'text/plain; charset=utf-8']) {
      const text = await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: { ...bearer(key), 'content-type': type }, body: 'x' })
      await expectError(text, 415, 'unsupported_media_type')
    }
    assert.equal((await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })).status, 204)
  })

  it('answers a malformed JSON body with 400 invalid_body, changing nothing', async () => {
    const response = await fetch(`${server.origin}/v1/store/orders/2`, {
      method: 'DELETE',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: '{"oops',
    })
    await expectError(response, 400, 'invalid_body')
    const list = await (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).json()
    assert.ok((list as { id: number }[]).some((o) => o.id === 2))
  })

  it('accepts an empty JSON body on DELETE', async () => {
    const response = await fetch(`${server.origin}/v1/store/orders/2`, {
      method: 'DELETE',
      headers: { ...bearer(key), 'content-type': 'application/json' },
    })
    assert.equal(response.status, 204)
  })

  it('answers a body over the limit with 413 payload_too_large', async () => {
    const response = await fetch(`${server.origin}/v1/store/orders/3`, {
      method: 'DELETE',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify({ padding: 'x'.repeat(100_000) }),
    })
    await expectError(response, 413, 'payload_too_large')
  })

  it('answers an internal failure with 500 internal_error and no internals', async () => {
    const broken = await startTestServer(kind)
    const brokenKey = await broken.createKey()
    await breakOrdersTable(broken)
    const response = await fetch(`${broken.origin}/v1/store/orders`, { headers: bearer(brokenKey) })
    const text = await response.clone().text()
    await expectError(response, 500, 'internal_error')
    assert.doesNotMatch(text, /orders|table|sqlite|relation|stack|at /i)
    const cancel = await fetch(`${broken.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(brokenKey) })
    await expectError(cancel, 500, 'internal_error')
  })

  it('puts nosniff and no-store on every error', async () => {
    const response = await fetch(`${server.origin}/nope`)
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff')
    assert.equal(response.headers.get('cache-control'), 'no-store')
  })
})

/** A real internal fault: the orders table disappears under the running server. */
async function breakOrdersTable(server: TestServer): Promise<void> {
  if (server.database.config.kind === 'sqlite') {
    const db = new Database(server.database.config.path)
    db.exec('ALTER TABLE orders RENAME TO orders_gone')
    db.close()
  } else {
    const client = new pg.Client({ connectionString: server.database.url })
    await client.connect()
    await client.query('ALTER TABLE orders RENAME TO orders_gone')
    await client.end()
  }
}
