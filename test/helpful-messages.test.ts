/** Messages that tell a client how to fix its request: an enum parameter's values, a body's media type. */
import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'

forEachStore('helpful error messages', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0' } })
    key = await server.createKey()
    await server.importOrders([{ id: 1n, status: 'pending' }])
  })
  after(() => server.close())

  it('an enum parameter that is not one of its values: 400 invalid_parameter listing them', async () => {
    for (const status of ['shiped', 'pending,', 'PENDING', 'pending;shipped']) {
      const response = await fetch(`${server.origin}/v2/store/orders?status=${encodeURIComponent(status)}`, { headers: bearer(key) })
      const body = await expectError(response, 400, 'invalid_parameter')
      assert.equal(body.message, 'status must be one or more of pending, shipped, cancelled, separated by commas.')
    }
  })

  it('a body that is not valid JSON: 400 invalid_body saying why, at which line and column; nothing placed', async () => {
    const cases: [string, string][] = [
      ['{\n  "petId": 7,\n  "quantity": 2\n  "shipDate": "2026-12-01T10:00:00Z"\n}', `comma ',' expected after value but got '"' at line 4, column 3`],
      ['{"petId": 7, "quantity": 2,}', "quoted object key expected but got '}' at line 1, column 28"],
      ['{"petId": 7, "quantity": ', "object value expected after ':' at line 1, column 26"],
      ["{'petId': 7}", "quoted object key expected but got ''' at line 1, column 2"],
      ['{"petId": 7}\r\n\r\nx', "expected end of input but got 'x' at line 3, column 1"],
      // Columns count characters: the cat, two UTF-16 units, is one.
      ['{"note": "ü🐈", "petId": 7 "quantity": 1}', `comma ',' expected after value but got '"' at line 1, column 27`],
    ]
    for (const [text, where] of cases) {
      const response = await fetch(`${server.origin}/v2/store/orders`, {
        method: 'POST',
        headers: { ...bearer(key), 'content-type': 'application/json' },
        body: text,
      })
      const body = await expectError(response, 400, 'invalid_body')
      assert.equal(body.message, `The request body is not valid JSON: ${where}.`, text)
    }
    const listed = await (await fetch(`${server.origin}/v2/store/orders`, { headers: bearer(key) })).text()
    assert.doesNotMatch(listed, /"petId":7/, 'nothing was placed')
  })

  it('a form-encoded or XML body gets the 415 message of text/plain: send JSON, and how', async () => {
    const messages = new Set<unknown>()
    for (const [type, body] of [
      ['text/plain', 'reason=other'],
      ['application/x-www-form-urlencoded', 'reason=other'],
      ['multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="reason"\r\n\r\nother\r\n--x--\r\n'],
      ['application/xml', '<reason>other</reason>'],
    ]) {
      const response = await fetch(`${server.origin}/v2/store/orders/1/cancel`, {
        method: 'POST',
        headers: { ...bearer(key), 'content-type': type! },
        body,
      })
      messages.add((await expectError(response, 415, 'unsupported_media_type')).message)
    }
    assert.deepEqual([...messages], ['The request body must be JSON, sent with Content-Type: application/json.'])
    // Nothing changed: the order is still pending, and cancels with a JSON body.
    const cancelled = await fetch(`${server.origin}/v2/store/orders/1/cancel`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: '{"reason":"other"}',
    })
    assert.equal(cancelled.status, 200)
  })
})
