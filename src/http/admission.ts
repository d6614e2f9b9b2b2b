import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from 'fastify'
import { normalizeIP } from '@fastify/rate-limit'
import type { Scope } from '../domain/api-keys.js'
import type { Authenticator } from './authenticator.js'
import { then, type MaybePromise } from '../maybe-async.js'
import type { RateLimiter } from './rate-limiter.js'

/** IPv6 clients are counted per /64: one end site holds a whole /64 or more. */
const IPV6_SUBNET = 64

/**
 * The onRequest hook of every operation that needs a key. A token this instance has already found
 * in the store is counted against its key's limit (429, RateLimit headers) before anything else,
 * then checked (401 revoked or expired, 403 scope), and read again only once its cache entry is
 * stale. Any other token is looked up (requests with a token already being read share its read),
 * and a key found is counted and checked the same way. Only a request no key answers (no token, a
 * malformed one, an unknown one) is counted against its client address's limit: past it, its 401
 * is a 429. So what a request gets never depends on which instance has seen its key before: a
 * working key is admitted by every instance, whatever its address's failures.
 * A callback hook, not an async one: with the key cached and the counters in memory, a request is
 * admitted without a single promise.
 */
export function admission(authenticator: Authenticator, limiter: RateLimiter): (...scopes: [Scope, ...Scope[]]) => onRequestHookHandler {
  /** A 401 counted against the client's address, and a 429 instead past its limit. */
  const refuse = (request: FastifyRequest, unauthorized: unknown): MaybePromise<never> =>
    then(limiter.countFailure(clientAddress(request)), () => {
      throw unauthorized
    })

  const admit = (request: FastifyRequest, reply: FastifyReply, scopes: readonly Scope[]): MaybePromise<void> => {
    let token: string
    try {
      token = authenticator.token(request.headers.authorization)
    } catch (unauthorized) {
      return refuse(request, unauthorized)
    }
    const known = authenticator.known(token)
    if (known !== undefined) {
      const counted = limiter.countKey(known.counter, reply)
      if (!(counted instanceof Promise) && authenticator.isFresh(known)) {
        request.apiKey = authenticator.admit(known, scopes) // the common case: no promise, no closure
        return
      }
      return then(counted, () =>
        then(authenticator.isFresh(known) ? known : authenticator.lookup(token), (key) => {
          request.apiKey = authenticator.admit(key, scopes, token)
        }),
      )
    }
    return authenticator.lookup(token).then((key) => {
      if (key === undefined) return refuse(request, authenticator.unknown(token))
      return then(limiter.countKey(key.counter, reply), () => {
        request.apiKey = authenticator.admit(key, scopes, token)
      })
    })
  }

  return (...scopes) =>
    function requireScope(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
      let admitted: MaybePromise<void>
      try {
        admitted = admit(request, reply, scopes)
      } catch (error) {
        done(error as Error)
        return
      }
      if (admitted instanceof Promise) admitted.then(() => done(), done)
      else done()
    }
}

/** As counted: IPv6 per subnet, IPv4-mapped as IPv4 (the socket may be gone already: then '?'). */
function clientAddress(request: FastifyRequest): string {
  return normalizeIP((request.ip as string | undefined) ?? '?', IPV6_SUBNET)
}
