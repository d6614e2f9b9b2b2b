import assert from 'node:assert/strict'
import { it } from 'node:test'
import { ConfigError, loadConfig } from '../src/config.js'
import { startTestServer } from './support/harness.js'

// HTTP_HEADERS_TIMEOUT_MS takes any value up to HTTP_REQUEST_TIMEOUT_MS: Node checks the one
// against the other when the server is created, so both are given to it then.

it('a headers timeout above Node\'s default request timeout (300 s) starts, and both are the server\'s', async () => {
  const server = await startTestServer('sqlite', { env: { HTTP_HEADERS_TIMEOUT_MS: '400000', HTTP_REQUEST_TIMEOUT_MS: '600000' } })
  try {
    assert.equal(server.app.server.headersTimeout, 400_000)
    assert.equal(server.app.server.requestTimeout, 600_000)
    assert.equal((await fetch(`${server.origin}/healthz`)).status, 200)
  } finally {
    await server.close()
  }
})

it('a headers timeout longer than the request timeout is refused by name', () => {
  assert.throws(
    () => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '60000', HTTP_REQUEST_TIMEOUT_MS: '30000' }),
    (error) => error instanceof ConfigError && error.message === 'HTTP_HEADERS_TIMEOUT_MS: must be at most HTTP_REQUEST_TIMEOUT_MS (30000), got 60000',
  )
  assert.equal(loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '30000', HTTP_REQUEST_TIMEOUT_MS: '30000' }).http.headersTimeoutMs, 30_000)
})
