import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, it } from 'node:test'
import type { FastifyBaseLogger } from 'fastify'
import { Redis } from 'ioredis'
import pino from 'pino'
import { generateApiKey } from '../src/domain/api-keys.js'
import { loadConfig } from '../src/config.js'
import { MemoryCounterStore } from '../src/http/memory-counter-store.js'
import type { CounterStore } from '../src/http/counter-store.js'
import { memoryCounters } from '../src/http/rate-limiter.js'
import { RedisCounters } from '../src/http/redis-counter-store.js'
import { bearer, createDatabase, eventually, expectError, forEachStore, startTestServer } from './support/harness.js'
import { REDIS_URL, redisSkipReason } from './support/redis.js'

const unknownKey = (): string => generateApiKey().secret
// Asked before any test runs: a server starting meanwhile could hold the event loop past the
// probe's connect timeout, and Redis would be taken for unreachable.
const redisReason = await redisSkipReason()

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

  it('counts a 403 against the key: a key without the scope cannot poll for free', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '3' } })
    const petsOnly = await server.createKey({ scopes: ['pets:read'] })
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) statuses.push((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(petsOnly) })).status)
    assert.deepEqual(statuses, [403, 403, 403, 429, 429])
  })

  it('limits failed authentication per client address, and never refuses a working key, seen before or not', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_AUTH_FAILURES: '3' } })
    const key = await server.createKey()
    const unseen = await server.createKey()
    // A working key is never a failure: its first request is not counted either.
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
    for (let i = 0; i < 2; i++) {
      await expectError(await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(unknownKey()) }), 401, 'unauthorized')
    }
    await expectError(await fetch(`${server.origin}/v1/store/orders`), 401, 'unauthorized') // no token: the third failure
    const blocked = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(unknownKey()) })
    assert.equal(blocked.headers.get('ratelimit-policy'), '"auth-failures";q=3;w=60')
    assert.ok(Number(blocked.headers.get('retry-after')) >= 1)
    await expectError(blocked, 429, 'rate_limited')
    await expectError(await fetch(`${server.origin}/v1/store/orders`, { headers: { authorization: 'Bearer not-a-key' } }), 429, 'rate_limited')
    // The address is blocked for failures, not for working keys: the one presented before, and one
    // this instance has never seen, as another instance that had not seen the first would take it.
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(unseen) })).status, 200)
  })

  it('answers the limit\'s worth of concurrent unknown keys from one address with 401, and the rest with 429', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_AUTH_FAILURES: '30' } })
    const statuses = await Promise.all(
      Array.from({ length: 300 }, () => fetch(`${server.origin}/v1/store/orders`, { headers: bearer(unknownKey()) }).then((r) => r.status)),
    )
    assert.equal(statuses.filter((status) => status === 401).length, 30)
    assert.equal(statuses.filter((status) => status === 429).length, 270)
  })

  it('counts failures per client address from X-Forwarded-For when the proxy is trusted (TRUST_PROXY)', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_AUTH_FAILURES: '3', TRUST_PROXY: '127.0.0.1/8' } })
    const key = await server.createKey()
    const from = (address: string, token: string) =>
      fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(token), 'x-forwarded-for': address } })
    for (let i = 0; i < 3; i++) await expectError(await from('203.0.113.7', unknownKey()), 401, 'unauthorized')
    await expectError(await from('203.0.113.7', unknownKey()), 429, 'rate_limited')
    // Another client behind the same proxy is not locked out, with a new key or a bad one.
    assert.equal((await from('198.51.100.9', key)).status, 200)
    await expectError(await from('198.51.100.9', unknownKey()), 401, 'unauthorized')
    // IPv6 clients are counted per /64: a client rotating addresses in its subnet shares one budget.
    for (let i = 1; i <= 3; i++) await expectError(await from(`2001:db8:1:2::${i}`, unknownKey()), 401, 'unauthorized')
    await expectError(await from('2001:db8:1:2:ffff::1', unknownKey()), 429, 'rate_limited')
    await expectError(await from('2001:db8:1:3::1', unknownKey()), 401, 'unauthorized')
  })

  it('never counts working keys against their address: many new keys, and a first burst, are all admitted', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_AUTH_FAILURES: '3' } })
    // Ten keys behind one address (one egress, one NAT), each new to this instance: more than the limit.
    const keys = await Promise.all(Array.from({ length: 10 }, () => server.createKey()))
    for (const key of keys) assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
    // Ten times the limit at once, all in flight before this instance has found the key.
    const fresh = await server.createKey()
    const statuses = await Promise.all(
      Array.from({ length: 30 }, () => fetch(`${server.origin}/v1/store/orders`, { headers: bearer(fresh) }).then((r) => r.status)),
    )
    assert.deepEqual(new Set(statuses), new Set([200]))
    // The address has failed nothing yet: three unknown keys are 401, the fourth 429.
    for (let i = 0; i < 3; i++) {
      await expectError(await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(unknownKey()) }), 401, 'unauthorized')
    }
    await expectError(await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(unknownKey()) }), 429, 'rate_limited')
  })

  it('turns a limit off with 0', async () => {
    const server = await startTestServer(kind, { env: { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_AUTH_FAILURES: '0' } })
    const key = await server.createKey()
    for (let i = 0; i < 40; i++) {
      await expectError(await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(unknownKey()) }), 401, 'unauthorized')
    }
    // The first list fills the list cache, so that the 100 at once are answered from it: lists still
    // being read from the database are bounded by LIST_MAX_RESPONSES (64), past which they are 503.
    assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
    const statuses = await Promise.all(
      Array.from({ length: 100 }, () => fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) }).then((r) => r.status)),
    )
    assert.deepEqual(new Set(statuses), new Set([200]))
  })
})

describe('rate limit settings', () => {
  it('takes TRUST_PROXY as addresses or CIDRs and names the variable when one is wrong', () => {
    assert.deepEqual(loadConfig({}).trustProxy, false)
    assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.168.1.5,fd00::/8' }).trustProxy, ['10.0.0.0/8', '192.168.1.5', 'fd00::/8'])
    for (const bad of ['true', '10.0.0.0/33', 'lb.internal', '10.0.0.1,', '::1/129']) {
      assert.throws(() => loadConfig({ TRUST_PROXY: bad }), /^ConfigError: TRUST_PROXY: /, bad)
    }
  })

  it('refuses the old RATE_LIMIT_REDIS_URL rather than silently counting per instance', () => {
    assert.throws(() => loadConfig({ RATE_LIMIT_REDIS_URL: 'redis://127.0.0.1:6379' }), /RATE_LIMIT_REDIS_URL: .*REDIS_URL/)
  })
})

// Needs no Redis: REDIS_URL points at a port where none listens.
describe('rate limits while Redis is unreachable', () => {
  it('fall back to per-instance counters and log the outage once, not per request', async () => {
    const lines: { level: number; msg: string; err?: unknown }[] = []
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
    const server = await startTestServer('sqlite', { env: { RATE_LIMIT_PER_KEY: '2', REDIS_URL: 'redis://127.0.0.1:1' }, logger })
    const key = await server.createKey()
    const statuses: number[] = []
    for (let i = 0; i < 20; i++) statuses.push((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status)
    assert.deepEqual(statuses, [200, 200, ...Array<number>(18).fill(429)])
    const warnings = lines.filter((line) => line.level >= 40 && /redis|rate limit/i.test(line.msg))
    assert.equal(warnings.length, 1, JSON.stringify(warnings))
  })

  it('log the outage again once a minute on the monotonic clock, and count in memory meanwhile', async () => {
    const warnings: unknown[] = []
    const log = { warn: (...args: unknown[]) => void warnings.push(args), info: () => {} } as unknown as FastifyBaseLogger
    let now = 0
    const redis = new RedisCounters('redis://127.0.0.1:1', 'petstore-test:', log, () => now)
    const counters = redis.store(memoryCounters())
    const counts: number[] = []
    for (let i = 0; i < 3; i++) counters.incr('k', (_error, result) => counts.push(result!.current), 60_000, 10)
    now += 59_999
    counters.incr('k', (_error, result) => counts.push(result!.current), 60_000, 10)
    assert.equal(warnings.length, 1)
    now += 1
    counters.incr('k', (_error, result) => counts.push(result!.current), 60_000, 10)
    assert.equal(warnings.length, 2)
    assert.deepEqual(counts, [1, 2, 3, 4, 5])
    await redis.close()
  })
})

describe('rate limits shared through Redis', () => {
  it('counts one budget for a key across two instances', { skip: redisReason }, async () => {
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

  it('admits a working key on an instance that has not seen it, while its address is over the limit', { skip: redisReason }, async () => {
    const database = await createDatabase('sqlite')
    const env = { RATE_LIMIT_AUTH_FAILURES: '3', REDIS_URL, RATE_LIMIT_REDIS_PREFIX: `petstore-test:${randomBytes(6).toString('hex')}:` }
    const a = await startTestServer('sqlite', { env, database })
    const b = await startTestServer('sqlite', { env, database })
    const key = await a.createKey()
    const list = (origin: string, token: string) => fetch(`${origin}/v1/store/orders`, { headers: bearer(token) })
    assert.equal((await list(a.origin, key)).status, 200) // a has found the key, b has not
    for (let i = 0; i < 3; i++) await expectError(await list(a.origin, unknownKey()), 401, 'unauthorized')
    await expectError(await list(a.origin, unknownKey()), 429, 'rate_limited')
    await expectError(await list(b.origin, unknownKey()), 429, 'rate_limited') // one budget for the address
    // Either instance gives the key what the other does.
    assert.deepEqual([(await list(b.origin, key)).status, (await list(a.origin, key)).status], [200, 200])
  })

  it('counts one failure budget per address across two instances', { skip: redisReason }, async () => {
    const database = await createDatabase('sqlite')
    const env = { RATE_LIMIT_AUTH_FAILURES: '10', REDIS_URL, RATE_LIMIT_REDIS_PREFIX: `petstore-test:${randomBytes(6).toString('hex')}:` }
    const a = await startTestServer('sqlite', { env, database })
    const b = await startTestServer('sqlite', { env, database })
    const statuses = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        fetch(`${i % 2 === 0 ? a.origin : b.origin}/v1/store/orders`, { headers: bearer(unknownKey()) }).then((r) => r.status),
      ),
    )
    assert.equal(statuses.filter((status) => status === 401).length, 10)
  })

  it('counts per instance while Redis is away mid-run, logged once, and in Redis again when it is back', { skip: redisReason }, async () => {
    // Redis is reached through a TCP relay that the test cuts and restores.
    const upstream = new URL(REDIS_URL)
    const sockets = new Set<Socket>()
    const relay = createServer((client) => {
      const redis = connect(Number(upstream.port || 6379), upstream.hostname)
      for (const socket of [client, redis]) {
        sockets.add(socket)
        socket.on('error', () => {})
        socket.on('close', () => sockets.delete(socket))
      }
      client.pipe(redis).pipe(client)
    })
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
    const port = (relay.address() as AddressInfo).port
    const lines: { level: number; msg: string }[] = []
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
    const env = { RATE_LIMIT_PER_KEY: '4', REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_REDIS_PREFIX: `petstore-test:${randomBytes(6).toString('hex')}:` }
    const server = await startTestServer('sqlite', { env, logger })
    const key = await server.createKey()
    const list = async () => (await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status
    assert.deepEqual([await list(), await list()], [200, 200]) // 2 counted in Redis

    await new Promise<void>((resolve) => {
      relay.close(() => resolve())
      for (const socket of sockets) socket.destroy()
    })
    // The instance has seen Redis go once it says so (its failed reconnection), however long that takes.
    await eventually(() => lines.some((line) => line.level === 40), 10)
    const during: number[] = []
    for (let i = 0; i < 6; i++) during.push(await list())
    assert.deepEqual(during, [200, 200, 200, 200, 429, 429]) // a fresh budget in this instance's memory
    assert.equal(lines.filter((line) => line.level === 40).length, 1)

    await new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve))
    await eventually(() => lines.some((line) => /again/.test(line.msg)), 100) // reconnected, however long that takes
    assert.deepEqual([await list(), await list(), await list()], [200, 200, 429]) // the 2 in Redis, then 2 more
    await server.close()
    relay.close()
    for (const socket of sockets) socket.destroy()
  })
})

/** The store's answer for one count of `key` in a window of `windowMs`. */
function count(store: CounterStore, key: string, windowMs = 60_000): Promise<{ current: number; ttl: number }> {
  return new Promise((resolve, reject) => store.incr(key, (error, result) => (error ? reject(error) : resolve(result!)), windowMs, 10))
}

describe('the in-memory counter store', () => {
  it('counts a key in a fixed window from its first count, on the clock it is given, answering at once', () => {
    let now = 1000
    const store: CounterStore = new MemoryCounterStore(100, () => now)
    const answers: { current: number; ttl: number }[] = []
    const countNow = (key: string): void => store.incr(key, (_error, result) => answers.push(result!), 60_000, 10)
    countNow('k')
    now += 15_000
    countNow('k')
    countNow('other')
    now += 44_999
    countNow('k')
    now += 1 // the window of 'k' has ended: a new one opens
    countNow('k')
    assert.deepEqual(answers, [
      { current: 1, ttl: 60_000 },
      { current: 2, ttl: 45_000 },
      { current: 1, ttl: 60_000 },
      { current: 3, ttl: 1 },
      { current: 1, ttl: 60_000 },
    ])
  })

  it('never answers more than the window, on a clock with fractions', async () => {
    // (12345.678901 + 60000) - 12345.678901 is 60000.00000000001 in floating point.
    const store = new MemoryCounterStore(100, () => 12345.678901)
    assert.equal((await count(store, 'k')).ttl, 60_000)
  })

  it('forgets the key counted least recently once it holds its bound', async () => {
    const store = new MemoryCounterStore(2, () => 0)
    for (const key of ['a', 'b', 'a', 'c']) await count(store, key) // 'a' was counted after 'b': 'b' goes
    assert.deepEqual([(await count(store, 'a')).current, (await count(store, 'b')).current], [3, 1])
  })
})

describe('the Redis counter store', () => {
  it("counts a key in one window shared by every client, under the prefix, with the key's expiry", { skip: redisReason }, async () => {
    const outages: unknown[] = []
    const log = { warn: (...args: unknown[]) => void outages.push(args), info: () => {} } as unknown as FastifyBaseLogger
    const notInMemory: CounterStore = { incr: (_key, callback) => callback(new Error('counted in memory while Redis is up')) }
    const prefix = `petstore-test:${randomBytes(6).toString('hex')}:`
    const [a, b] = [new RedisCounters(REDIS_URL, prefix, log), new RedisCounters(REDIS_URL, prefix, log)]
    const direct = new Redis(REDIS_URL)
    try {
      await Promise.all([a.ready(), b.ready()])
      const [storeA, storeB] = [a.store(notInMemory), b.store(notInMemory)]
      assert.deepEqual(await count(storeA, 'k'), { current: 1, ttl: 60_000 })
      const second = await count(storeB, 'k')
      assert.equal(second.current, 2)
      assert.ok(second.ttl > 0 && second.ttl <= 60_000, String(second.ttl))
      assert.equal(await direct.get(`${prefix}k`), '2')
      const pttl = await direct.pttl(`${prefix}k`)
      assert.ok(pttl > 0 && pttl <= 60_000, String(pttl))

      // A window ends with its key: the next count opens a new one. The script opened the window
      // before its answer came, so waiting it out from the answer (a lower bound: however long the
      // round trips take) leaves the key gone. Counts within one window add up: 'k' above, whose
      // window of a minute holds both its counts.
      assert.deepEqual(await count(storeA, 'short', 100), { current: 1, ttl: 100 })
      await sleep(150)
      assert.equal(await direct.exists(`${prefix}short`), 0, 'the key outlived its window')
      assert.deepEqual(await count(storeB, 'short', 100), { current: 1, ttl: 100 })

      // A key found without an expiry is given the window, not counted forever.
      await direct.set(`${prefix}stuck`, '5')
      assert.deepEqual(await count(storeA, 'stuck'), { current: 6, ttl: 60_000 })
      assert.ok((await direct.pttl(`${prefix}stuck`)) > 0)
      assert.deepEqual(outages, [])
    } finally {
      await direct.del(`${prefix}k`, `${prefix}short`, `${prefix}stuck`)
      direct.disconnect()
      await Promise.all([a.close(), b.close()])
    }
  })
})
