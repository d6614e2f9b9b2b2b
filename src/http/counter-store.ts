import type { FastifyRateLimitStore } from '@fastify/rate-limit'

/**
 * @fastify/rate-limit's public store interface (fixed windows), the part the limits use: `incr`
 * counts one under a key and calls back with the window's count and the milliseconds left in it.
 * The stores are this service's own (memory-counter-store.ts, redis-counter-store.ts), and the
 * plugin is not registered: it counts in a route hook (or createRateLimit's check, always a
 * promise), sends the older draft's RateLimit-Limit/-Remaining/-Reset, and while its store fails
 * either refuses requests or lets them through uncounted (skipOnError). These limits count at two
 * points of authentication, answer with the current draft's RateLimit and RateLimit-Policy,
 * without a promise when counted in memory, and count in memory while Redis is away.
 */
export type CounterStore = Pick<FastifyRateLimitStore, 'incr'>
