import { performance } from 'node:perf_hooks'
import type { FastifyBaseLogger } from 'fastify'
import { Redis, type Result } from 'ioredis'
import { OutageLog } from '../outage-log.js'
import type { CounterStore } from './counter-store.js'

/**
 * One fixed window per key, shared by every instance: the count goes up by one and the window opens
 * at the first count (PEXPIRE), in one script, so that no count is left without its expiry; a key
 * found without one (set by hand, say) is given the window rather than counted forever. Answers the
 * count and the window's milliseconds left. Keys and windows are those of @fastify/rate-limit's
 * Redis store, which this replaces: instances of the previous version share the counts in a deploy.
 */
const COUNT_IN_WINDOW = `
local current = redis.call('INCR', KEYS[1])
local ttl = -1
if current > 1 then ttl = redis.call('PTTL', KEYS[1]) end
if ttl < 0 then
  ttl = tonumber(ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return { current, ttl }
`

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** COUNT_IN_WINDOW, defined by the `scripts` option of the client below. */
    countInWindow(key: string, windowMs: number): Result<[number, number], Context>
  }
}

/**
 * The rate limits' counters in Redis, shared by every instance, each limit with an in-memory store
 * that counts in its place while Redis is away: the limits then hold per instance instead of
 * failing open. Its own module, loaded only when REDIS_URL is set: ioredis adds about 3 MiB to the
 * idle memory of a server that never uses it (measured on the started server).
 */
export class RedisCounters {
  private readonly redis: Redis
  /** While Redis is away, its outage is logged once a minute at most, and its end once (a request never logs it). */
  private readonly outages: OutageLog

  constructor(
    url: string,
    private readonly prefix: string,
    log: FastifyBaseLogger,
    now: () => number = () => performance.now(),
  ) {
    this.outages = new OutageLog(
      log,
      { failing: 'rate limit counters unavailable in Redis; counting per instance until it is back', answering: 'rate limit counters are shared through Redis again' },
      60_000,
      now,
    )
    // Fail fast while Redis is away (no offline queue, one retry, a command timeout): a request
    // is then counted in memory rather than held.
    this.redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      commandTimeout: 1000,
      scripts: { countInWindow: { numberOfKeys: 1, lua: COUNT_IN_WINDOW } },
    })
    this.redis.on('error', (error: Error) => this.outage(error))
    this.redis.on('ready', () => this.outages.succeeded())
  }

  /** Resolves once Redis is ready, or after `timeoutMs` (counting in memory until it is). */
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

  /** A store counting in Redis, or in `fallback` while Redis is away. */
  store(fallback: CounterStore): CounterStore {
    return {
      incr: (key, callback, windowMs, max) => {
        if (this.redis.status !== 'ready') {
          this.outage(undefined)
          return fallback.incr(key, callback, windowMs, max)
        }
        this.redis.countInWindow(this.prefix + key, windowMs).then(
          ([current, ttl]) => callback(null, { current, ttl }),
          (error: Error) => {
            this.outage(error)
            fallback.incr(key, callback, windowMs, max)
          },
        )
      },
    }
  }

  async close(): Promise<void> {
    this.redis.disconnect()
  }

  private outage(error: Error | undefined): void {
    this.outages.failed(error ?? new Error(`connection ${this.redis.status}`))
  }
}
