import { Redis } from 'ioredis'
import type { CounterStore, CounterWindow } from './rate-limiter.js'

// INCR and set the expiry on the first hit, atomically: every instance shares one window per key.
const HIT = `local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {c, redis.call('PTTL', KEYS[1])}`
const PEEK = `return {tonumber(redis.call('GET', KEYS[1]) or '0'), redis.call('PTTL', KEYS[1])}`

/**
 * The rate limits' counters in Redis, shared by every instance. Its own module, loaded only when
 * RATE_LIMIT_REDIS_URL is set: ioredis adds about 3 MiB to the idle memory of a server that never
 * uses it (measured on the started server).
 */
export class RedisCounterStore implements CounterStore {
  private readonly redis: Redis

  constructor(
    url: string,
    private readonly prefix: string,
  ) {
    // Fail fast while Redis is away (no offline queue, one retry): the limiter then lets requests
    // through rather than holding them (see RateLimiter).
    this.redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000, lazyConnect: false })
    this.redis.on('error', () => {}) // reported per request by the limiter; reconnects by itself
  }

  ready(timeoutMs = 2000): Promise<void> {
    if (this.redis.status === 'ready') return Promise.resolve()
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        this.redis.off('ready', done)
        resolve()
      }
      const timer = setTimeout(done, timeoutMs)
      this.redis.once('ready', done)
    })
  }

  async hit(key: string, windowMs: number): Promise<CounterWindow> {
    const [count, ttl] = (await this.redis.eval(HIT, 1, `${this.prefix}${key}`, windowMs)) as [number, number]
    return { count, resetMs: Math.max(ttl, 0) }
  }

  async peek(key: string): Promise<CounterWindow> {
    const [count, ttl] = (await this.redis.eval(PEEK, 1, `${this.prefix}${key}`)) as [number, number]
    return { count, resetMs: Math.max(ttl, 0) }
  }

  async close(): Promise<void> {
    this.redis.disconnect()
  }
}
