import type { FastifyBaseLogger, FastifyReply } from 'fastify'
import { ApiError } from '../errors.js'
import type { MaybePromise } from '../maybe-async.js'

/**
 * Fixed-window request counters: a window starts at a key's first hit and lasts `windowMs`.
 * In memory (one instance) or in Redis (shared by every instance; redis-counter-store.ts).
 */
export interface CounterWindow {
  count: number
  resetMs: number
}

export interface CounterStore {
  /** Counts one hit and returns the count in the current window and the ms until it resets. */
  hit(key: string, windowMs: number): MaybePromise<CounterWindow>
  /** Resolves once the store can count (or could not within its timeout: it fails open then). */
  ready?(): Promise<void>
  /** The count in the current window without counting. */
  peek(key: string): MaybePromise<CounterWindow>
  close(): Promise<void>
}

const NO_WINDOW: CounterWindow = Object.freeze({ count: 0, resetMs: 0 })

/** In this process only, answered at once (no promise). */
export class MemoryCounterStore implements CounterStore {
  private readonly windows = new Map<string, { count: number; resetAt: number }>()
  private readonly sweeper: NodeJS.Timeout

  constructor(private readonly now: () => number = Date.now) {
    // Expired windows are dropped once a minute, so idle keys and addresses do not accumulate.
    this.sweeper = setInterval(() => {
      const now = this.now()
      for (const [key, window] of this.windows) if (window.resetAt <= now) this.windows.delete(key)
    }, 60_000).unref()
  }

  hit(key: string, windowMs: number): CounterWindow {
    const now = this.now()
    let window = this.windows.get(key)
    if (window === undefined || window.resetAt <= now) {
      window = { count: 0, resetAt: now + windowMs }
      this.windows.set(key, window)
    }
    window.count++
    return { count: window.count, resetMs: window.resetAt - now }
  }

  peek(key: string): CounterWindow {
    const now = this.now()
    const window = this.windows.get(key)
    return window === undefined || window.resetAt <= now ? NO_WINDOW : { count: window.count, resetMs: window.resetAt - now }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper)
  }
}

interface Policy {
  /** The policy's name in RateLimit / RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers). */
  name: string
  limit: number
  windowMs: number
  /** Its RateLimit-Policy header, the same on every response. */
  header: string
}

/** Past this many names cached per policy, the cache starts over (client addresses are unbounded). */
const MAX_CACHED_NAMES = 10_000

/**
 * The two limits of the API: requests per API key, and failed authentications per client address
 * (a guard against guessing keys). A limit of 0 is off. If the counter store fails (Redis away),
 * requests are let through and the failure is logged: the limiter must not take the API down.
 *
 * Every request is checked against both, so the common case (local counters) makes no closure,
 * no promise and no new string: counter names are kept per key id and per address.
 */
export class RateLimiter {
  private readonly perKey: Policy
  private readonly authFailures: Policy
  private readonly keyCounters = new Map<bigint, string>()
  private readonly addressCounters = new Map<string, string>()

  constructor(
    private readonly counters: CounterStore,
    limits: { perKeyPerMinute: number; authFailuresPerMinute: number },
    private readonly log: FastifyBaseLogger,
  ) {
    this.perKey = policy('per-key', limits.perKeyPerMinute, 60_000)
    this.authFailures = policy('auth-failures', limits.authFailuresPerMinute, 60_000)
  }

  /** 429 if this address has failed authentication too often in the current window. */
  checkAuthFailures(address: string): MaybePromise<void> {
    if (this.authFailures.limit === 0) return
    return this.counted(this.addressCounter(address), undefined, this.refuseIfBlocked, undefined)
  }

  recordAuthFailure(address: string): MaybePromise<void> {
    if (this.authFailures.limit === 0) return
    return this.counted(this.addressCounter(address), this.authFailures.windowMs, nothingToDecide, undefined)
  }

  /** Counts a request of this key; 429 past the limit. Sets the RateLimit headers either way. */
  consume(keyId: bigint, reply: FastifyReply): MaybePromise<void> {
    if (this.perKey.limit === 0) return
    return this.counted(this.keyCounter(keyId), this.perKey.windowMs, this.admitKey, reply)
  }

  close(): Promise<void> {
    return this.counters.close()
  }

  /**
   * `decide(window, arg)` on the counter's window: peeked, or hit when `hitWindowMs` is given. Now if
   * the counters answer at once, else when they do. Counters that fail, at once or later, let the
   * request through (logged); a 429 thrown by `decide` is not a failure. No closure is made on the
   * way that answers at once.
   */
  private counted<A>(
    name: string,
    hitWindowMs: number | undefined,
    decide: (this: RateLimiter, window: CounterWindow, arg: A) => void,
    arg: A,
  ): MaybePromise<void> {
    let window: MaybePromise<CounterWindow>
    try {
      window = hitWindowMs === undefined ? this.counters.peek(name) : this.counters.hit(name, hitWindowMs)
    } catch (error) {
      return this.failOpen(error)
    }
    if (!(window instanceof Promise)) return decide.call(this, window, arg)
    return window.then(
      (answered) => decide.call(this, answered, arg),
      (error: unknown) => this.failOpen(error),
    )
  }

  private keyCounter(keyId: bigint): string {
    return this.keyCounters.get(keyId) ?? remember(this.keyCounters, keyId, `${this.perKey.name}:${keyId}`)
  }

  private addressCounter(address: string): string {
    // `address` is the socket's own string on every request of a connection, its hash computed once.
    return this.addressCounters.get(address) ?? remember(this.addressCounters, address, `${this.authFailures.name}:${address}`)
  }

  private refuseIfBlocked(window: CounterWindow): void {
    if (window.count >= this.authFailures.limit) throw limited(this.authFailures, window.resetMs)
  }

  private admitKey(window: CounterWindow, reply: FastifyReply): void {
    const policy = this.perKey
    if (window.count > policy.limit) throw limited(policy, window.resetMs)
    reply.header('ratelimit-policy', policy.header)
    reply.header('ratelimit', rateLimit(policy, policy.limit - window.count, window.resetMs))
  }

  private failOpen(error: unknown): void {
    this.log.warn({ err: error }, 'rate limit counters unavailable; request let through')
  }
}

/** A hit that decides nothing (a failed authentication is only counted). */
function nothingToDecide(): void {}

function policy(name: string, limit: number, windowMs: number): Policy {
  return { name, limit, windowMs, header: `"${name}";q=${limit};w=${windowMs / 1000}` }
}

function remember<K>(names: Map<K, string>, id: K, name: string): string {
  if (names.size >= MAX_CACHED_NAMES) names.clear()
  names.set(id, name)
  return name
}

function rateLimit(policy: Policy, remaining: number, resetMs: number): string {
  return `"${policy.name}";r=${Math.max(remaining, 0)};t=${Math.max(1, Math.ceil(resetMs / 1000))}`
}

function limited(policy: Policy, resetMs: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil(resetMs / 1000))
  return new ApiError('rate_limited', undefined, {
    'ratelimit-policy': policy.header,
    ratelimit: rateLimit(policy, 0, resetMs),
    'retry-after': String(retryAfter),
  })
}
