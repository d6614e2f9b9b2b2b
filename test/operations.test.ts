import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'

forEachStore('operations endpoints', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    await server.importOrders([{ id: 1n }, { id: 2n, status: 'shipped' }])
  })

  it('answers /healthz and /readyz without a key', async () => {
    const health = await fetch(`${server.origin}/healthz`)
    assert.equal(health.status, 200)
    assert.deepEqual(await health.json(), { status: 'ok' })
    const ready = await fetch(`${server.origin}/readyz`)
    assert.equal(ready.status, 200)
    assert.deepEqual(await ready.json(), { status: 'ready' })
  })

  it('counts requests by route pattern and status, and cancels by outcome, in Prometheus text', async () => {
    await (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).arrayBuffer() // read whole: a request is counted when its response has finished
    await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })
    await fetch(`${server.origin}/v1/store/orders/2`, { method: 'DELETE', headers: bearer(key) })
    await fetch(`${server.origin}/v1/store/orders/3`, { method: 'DELETE', headers: bearer(key) })
    const response = await fetch(`${server.origin}/metrics`)
    assert.equal(response.status, 200)
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain/)
    const text = await response.text()
    assert.match(text, /http_requests_total\{method="GET",route="\/v1\/store\/orders",status="200"\} 1\n/)
    assert.match(text, /http_requests_total\{method="DELETE",route="\/v1\/store\/orders\/:orderId",status="204"\} 1\n/)
    assert.match(text, /http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/v1\/store\/orders",status="200"\}/)
    assert.match(text, /orders_cancel_total\{outcome="cancelled"\} 1\n/)
    assert.match(text, /orders_cancel_total\{outcome="already_shipped"\} 1\n/)
    assert.match(text, /orders_cancel_total\{outcome="not_found"\} 1\n/)
    assert.ok(!text.includes(key), 'metrics never carry a key')

    // Counts keep adding up from one scrape to the next, and agree with the duration histogram's.
    await (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).arrayBuffer()
    await (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).arrayBuffer()
    const again = await (await fetch(`${server.origin}/metrics`)).text()
    assert.match(again, /http_requests_total\{method="GET",route="\/v1\/store\/orders",status="200"\} 3\n/)
    assert.match(again, /http_request_duration_seconds_count\{method="GET",route="\/v1\/store\/orders",status="200"\} 3\n/)
    assert.match(again, /http_requests_total\{method="GET",route="\/metrics",status="200"\} 1\n/)

    // A path no route has is counted as unmatched; a method a path lacks, under the path's pattern.
    await fetch(`${server.origin}/nope/123`)
    await fetch(`${server.origin}/v1/store/orders/7`, { method: 'PUT', headers: bearer(key) })
    await fetch(`${server.origin}/v1/store/orders`, { method: 'HEAD', headers: bearer(key) })
    const third = await (await fetch(`${server.origin}/metrics`)).text()
    assert.match(third, /http_requests_total\{method="GET",route="unmatched",status="404"\} 1\n/)
    assert.match(third, /http_requests_total\{method="PUT",route="\/v1\/store\/orders\/:orderId",status="405"\} 1\n/)
    assert.match(third, /http_requests_total\{method="HEAD",route="\/v1\/store\/orders",status="200"\} 1\n/)
    assert.match(third, /http_request_duration_seconds_count\{method="GET",route="unmatched",status="404"\} 1\n/)
    assert.ok(!third.includes('/nope'), 'an unmatched path is never a label')
  })

  it('echoes a plain X-Request-Id and generates one otherwise', async () => {
    const given = await fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'x-request-id': 'abc-123' } })
    assert.equal(given.headers.get('x-request-id'), 'abc-123')
    const generated = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    assert.match(generated.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/)
    // An id that could forge log lines or headers is replaced, not echoed.
    const hostile = await fetch(`${server.origin}/nope`, { headers: { 'x-request-id': 'a"b c'.repeat(10) } })
    assert.match(hostile.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/)
    await expectError(hostile, 404, 'not_found')
  })

  it('serves the OpenAPI document without a key', async () => {
    const response = await fetch(`${server.origin}/v1/openapi.json`)
    assert.equal(response.status, 200)
    assert.equal(((await response.json()) as { info: { version: string } }).info.version, '1.0.0')
  })
})
