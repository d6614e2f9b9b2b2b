import type { FastifyBaseLogger } from 'fastify'
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
    return window === undefined || window.resetAt <= now ? { count: 0, resetMs: 0 } : { count: window.count, resetMs: window.resetAt - now }
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
}

/**
 * The two limits of the API: requests per API key, and failed authentications per client address
 * (a guard against guessing keys). A limit of 0 is off. If the counter store fails (Redis away),
 * requests are let through and the failure is logged: the limiter must not take the API down.
 */
export class RateLimiter {
  private readonly perKey: Policy
  private readonly authFailures: Policy

  constructor(
    private readonly counters: CounterStore,
    limits: { perKeyPerMinute: number; authFailuresPerMinute: number },
    private readonly log: FastifyBaseLogger,
  ) {
    this.perKey = { name: 'per-key', limit: limits.perKeyPerMinute, windowMs: 60_000 }
    this.authFailures = { name: 'auth-failures', limit: limits.authFailuresPerMinute, windowMs: 60_000 }
  }

  /** 429 if this address has failed authentication too often in the current window. */
  checkAuthFailures(address: string): MaybePromise<void> {
    const policy = this.authFailures
    if (policy.limit === 0) return
    return this.guarded(
      () => this.counters.peek(`${policy.name}:${address}`),
      (window) => {
        if (window.count >= policy.limit) throw limited(policy, window.resetMs)
      },
      undefined,
    )
  }

  recordAuthFailure(address: string): MaybePromise<void> {
    const policy = this.authFailures
    if (policy.limit === 0) return
    return this.guarded(() => this.counters.hit(`${policy.name}:${address}`, policy.windowMs), () => {}, undefined)
  }

  /** Counts a request of this key; 429 past the limit. Returns the headers to send either way. */
  consume(keyId: bigint): MaybePromise<Record<string, string>> {
    const policy = this.perKey
    if (policy.limit === 0) return {}
    return this.guarded(
      () => this.counters.hit(`${policy.name}:${keyId}`, policy.windowMs),
      (window) => {
        if (window.count > policy.limit) throw limited(policy, window.resetMs)
        return headers(policy, policy.limit - window.count, window.resetMs)
      },
      {},
    )
  }

  close(): Promise<void> {
    return this.counters.close()
  }

  /** `decide` on the counted window; `letThrough` when the counters fail. A 429 thrown by `decide` is not a failure. */
  private guarded<R>(count: () => MaybePromise<CounterWindow>, decide: (window: CounterWindow) => R, letThrough: R): MaybePromise<R> {
    let window: MaybePromise<CounterWindow>
    try {
      window = count()
    } catch (error) {
      return this.failOpen(error, letThrough)
    }
    return window instanceof Promise ? window.then(decide, (error: unknown) => this.failOpen(error, letThrough)) : decide(window)
  }

  private failOpen<R>(error: unknown, letThrough: R): R {
    this.log.warn({ err: error }, 'rate limit counters unavailable; request let through')
    return letThrough
  }
}

function headers(policy: Policy, remaining: number, resetMs: number): Record<string, string> {
  const seconds = Math.max(1, Math.ceil(resetMs / 1000))
  return {
    'ratelimit-policy': `"${policy.name}";q=${policy.limit};w=${policy.windowMs / 1000}`,
    ratelimit: `"${policy.name}";r=${Math.max(remaining, 0)};t=${seconds}`,
  }
}

function limited(policy: Policy, resetMs: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil(resetMs / 1000))
  return new ApiError('rate_limited', undefined, { ...headers(policy, 0, resetMs), 'retry-after': String(retryAfter) })
}
