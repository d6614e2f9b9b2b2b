import type { FastifyReply } from 'fastify'
import { ApiError } from '../errors.js'
import type { MaybePromise } from '../maybe-async.js'
import type { CounterStore } from './counter-store.js'
import { MemoryCounterStore } from './memory-counter-store.js'

type Counted = { current: number; ttl: number }

/** Counters kept per policy: past these, the least recently counted key or address is forgotten. */
const MAX_COUNTERS = 10_000

export function memoryCounters(): CounterStore {
  return new MemoryCounterStore(MAX_COUNTERS)
}

interface Policy {
  /** The policy's name in RateLimit / RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers). */
  name: string
  limit: number
  windowMs: number
  /** Its RateLimit-Policy header, the same on every response. */
  header: string
  counters: CounterStore
}

/**
 * The two limits of the API, each a fixed window of a minute counted in a CounterStore: requests
 * per API key (403s included), and failed authentication per client address (requests no key
 * answers: a client that keeps failing is told to stop). Both count first and decide after, so
 * concurrent requests cannot overshoot. A limit of 0 is off.
 */
export class RateLimiter {
  readonly perKey: Policy
  readonly authFailures: Policy

  constructor(
    limits: { perKeyPerMinute: number; authFailuresPerMinute: number },
    counters: { perKey: CounterStore; authFailures: CounterStore },
  ) {
    this.perKey = policy('per-key', limits.perKeyPerMinute, counters.perKey)
    this.authFailures = policy('auth-failures', limits.authFailuresPerMinute, counters.authFailures)
  }

  /** Counts a failed authentication from this address (a normalized IP); 429 past the limit. */
  countFailure(address: string): MaybePromise<void> {
    const policy = this.authFailures
    if (policy.limit === 0) return
    return decide(count(policy, `${policy.name}:${address}`), policy, undefined)
  }

  /** Counts a request of this key (`counter`: its keyCounter); 429 past the limit. RateLimit headers either way. */
  countKey(counter: string, reply: FastifyReply): MaybePromise<void> {
    if (this.perKey.limit === 0) return
    return decide(count(this.perKey, counter), this.perKey, reply)
  }
}

export function keyCounter(keyId: bigint): string {
  return `per-key:${keyId}`
}

/** The store's callback answer, now if it calls back at once (memory), else a promise (Redis). */
function count(policy: Policy, name: string): MaybePromise<Counted> {
  let answer: Counted | Error | undefined
  let settle: ((answer: Counted | Error) => void) | undefined
  policy.counters.incr(
    name,
    (error, result) => {
      answer = error ?? result!
      settle?.(answer)
    },
    policy.windowMs,
    policy.limit,
  )
  if (answer === undefined) return new Promise((resolve, reject) => (settle = (a) => (a instanceof Error ? reject(a) : resolve(a))))
  if (answer instanceof Error) throw answer
  return answer
}

function decide(counted: MaybePromise<Counted>, policy: Policy, reply: FastifyReply | undefined): MaybePromise<void> {
  if (counted instanceof Promise) return counted.then((answer) => decide(answer, policy, reply))
  if (counted.current > policy.limit) throw limited(policy, counted.ttl)
  if (reply === undefined) return
  reply.header('ratelimit-policy', policy.header)
  reply.header('ratelimit', rateLimit(policy, policy.limit - counted.current, counted.ttl))
}

function policy(name: string, limit: number, counters: CounterStore): Policy {
  const windowMs = 60_000
  return { name, limit, windowMs, header: `"${name}";q=${limit};w=${windowMs / 1000}`, counters }
}

function rateLimit(policy: Policy, remaining: number, resetMs: number): string {
  return `"${policy.name}";r=${Math.max(remaining, 0)};t=${Math.max(1, Math.ceil(resetMs / 1000))}`
}

function limited(policy: Policy, resetMs: number): ApiError {
  return new ApiError('rate_limited', undefined, {
    'ratelimit-policy': policy.header,
    ratelimit: rateLimit(policy, 0, resetMs),
    'retry-after': String(Math.max(1, Math.ceil(resetMs / 1000))),
  })
}
