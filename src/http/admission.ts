import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from 'fastify'
import type { ApiKey, Scope } from '../domain/api-keys.js'
import { ApiError } from '../errors.js'
import type { Authenticator } from './authenticator.js'
import { then, type MaybePromise } from '../maybe-async.js'
import type { RateLimiter } from './rate-limiter.js'

/**
 * The onRequest hook of every operation that needs a key: the failed-authentication limit of the
 * client's address (429), the key (401) and its scope (403), then the key's own request limit (429,
 * and the RateLimit headers). A callback hook, not an async one: with the key cached and the counters
 * in memory, a request is admitted without a single promise.
 */
export function admission(authenticator: Authenticator, limiter: RateLimiter): (scope: Scope) => onRequestHookHandler {
  const authenticate = (request: FastifyRequest, scope: Scope): MaybePromise<ApiKey> => {
    const refused = (error: unknown): MaybePromise<never> => {
      if (!(error instanceof ApiError && error.code === 'unauthorized')) throw error
      return then(limiter.recordAuthFailure(request.ip), () => {
        throw error
      })
    }
    try {
      const key = authenticator.authenticate(request.headers.authorization, scope)
      return key instanceof Promise ? key.catch(refused) : key
    } catch (error) {
      return refused(error)
    }
  }

  const admit = (request: FastifyRequest, reply: FastifyReply, scope: Scope): MaybePromise<void> =>
    then(limiter.checkAuthFailures(request.ip), () =>
      then(authenticate(request, scope), (key) => {
        request.apiKey = key
        return limiter.consume(key.id, reply)
      }),
    )

  return (scope) =>
    function requireScope(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
      let admitted: MaybePromise<void>
      try {
        admitted = admit(request, reply, scope)
      } catch (error) {
        done(error as Error)
        return
      }
      if (admitted instanceof Promise) admitted.then(() => done(), done)
      else done()
    }
}
