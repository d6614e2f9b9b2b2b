import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { bearer, createDatabase, expectError, forEachStore, startTestServer } from './support/harness.js'
import { REDIS_URL, redisSkipReason } from './support/redis.js'

forEachStore('rate limits', (kind) => {
  it('limits requests per API key with RateLimit headers, then 429 with Retry-After', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '5' } })
    const key = await server.createKey()
    const other = await server.createKey()
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
      assert.equal(response.status, 200)
      assert.equal(response.headers.get('ratelimit-policy'), '"per-key";q=5;w=60')
      assert.match(response.headers.get('ratelimit') ?? '', new RegExp(`^"per-key";r=${4 - i};t=[1-6]?[0-9]$`))
    }
    const limited = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    assert.match(limited.headers.get('retry-after') ?? '', /^[1-6]?[0-9]$/)
    assert.match(limited.headers.get('ratelimit') ?? '', /^"per-key";r=0;t=\d+$/)
    assert.equal(limited.headers.get('ratelimit-policy'), '"per-key";q=5;w=60')
    await expectError(limited, 429, 'rate_limited')
    // A limited key changes nothing: its cancel is refused before it is attempted.
    await server.importOrders([{ id: 1n }])
    await expectError(await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) }), 429, 'rate_limited')
    // Another key has its own budget, and sees the order still pending.
    assert.equal((await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(other) })).status, 204)
  })

  it('limits failed authentication per client address, even for a then-valid key', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_AUTH_FAILURES: '3' } })
    const key = await server.createKey()
    for (let i = 0; i < 3; i++) {
      await expectError(await fetch(`${server.origin}/v1/store/orders`, { headers: bearer('pso_' + 'x'.repeat(40)) }), 401, 'unauthorized')
    }
    const blocked = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
    assert.equal(blocked.headers.get('ratelimit-policy'), '"auth-failures";q=3;w=60')
    assert.ok(Number(blocked.headers.get('retry-after')) >= 1)
    await expectError(blocked, 429, 'rate_limited')
  })

  it('turns a limit off with 0', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_AUTH_FAILURES: '0' } })
    const key = await server.createKey()
    for (let i = 0; i < 40; i++) {
      await expectError(await fetch(`${server.origin}/v1/store/orders`, { headers: bearer('pso_' + 'y'.repeat(40)) }), 401, 'unauthorized')
    }
    const statuses = await Promise.all(
      Array.from({ length: 100 }, () => fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) }).then((r) => r.status)),
    )
    assert.deepEqual(new Set(statuses), new Set([200]))
  })
})

describe('rate limits shared through Redis', async () => {
  const reason = await redisSkipReason()

  it('counts one budget for a key across two instances', { skip: reason }, async () => {
    const database = await createDatabase('sqlite')
    const env = { RATE_LIMIT_PER_KEY: '6', REDIS_URL, RATE_LIMIT_REDIS_PREFIX: `petstore-test:${randomBytes(6).toString('hex')}:` }
    const a = await startTestServer('sqlite', { env, database })
    const b = await startTestServer('sqlite', { env, database })
    const key = await a.createKey()
    const statuses: number[] = []
    for (let i = 0; i < 8; i++) {
      const origin = i % 2 === 0 ? a.origin : b.origin
      statuses.push((await fetch(`${origin}/v1/store/orders`, { headers: bearer(key) })).status)
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 429, 429])
  })

  it('lets requests through when Redis is unreachable', { skip: reason }, async () => {
    const server = await startTestServer('sqlite', { env: { RATE_LIMIT_PER_KEY: '1', REDIS_URL: 'redis://127.0.0.1:1' } })
    const key = await server.createKey()
    for (let i = 0; i < 3; i++) {
      assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
    }
  })
})
