// What is retried, and when: the backoff between attempts, and which failures each call retries.
import { PetstoreApiError, RequestTimeoutError } from './errors.js'

const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 5000
/** Statuses that say "not now": the request is retried from the same cursor. */
const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504])

/** `Retry-After` when the response had one, else a backoff doubling from RETRY_FIRST_MS to RETRY_MAX_MS, jittered. */
export function retryDelay(error: unknown, attempt: number): number {
  if (error instanceof PetstoreApiError && error.retryAfter !== undefined) return Math.max(error.retryAfter * 1000, RETRY_FIRST_MS)
  const backoff = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(attempt - 1, 16))
  return Math.round(backoff / 2 + (Math.random() * backoff) / 2) // many clients of a restarted server do not return in step
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
export function pause(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted === true) return Promise.resolve(false)
  if (ms <= 0) return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = (completed: boolean): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      resolve(completed)
    }
    const onAbort = (): void => done(false)
    const timer = setTimeout(done, ms, true)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** Whether a failed poll is retried: no response at all, or a status that means "not now". */
export function isTransient(error: unknown): boolean {
  if (error instanceof PetstoreApiError) return RETRIED_STATUSES.has(error.status)
  // fetch's network errors are TypeErrors with the cause (refused, reset, closed); a TypeError
  // without one is a request that could never be sent (e.g. a key with a newline): not retried.
  if (error instanceof TypeError) return error.cause !== undefined
  return true
}

/** A response whose headers arrived but whose body did not: as good as no response. */
export class ResponseCutOffError extends Error {
  constructor(cause: unknown) {
    super('the response was cut off before its end', { cause })
    this.name = 'ResponseCutOffError'
  }
}

/** Retried with the same key: no (whole) response, a 5xx, or the first request with the key still in flight. */
export function isRetriedPlaceFailure(error: unknown): boolean {
  if (error instanceof PetstoreApiError) return error.status >= 500 || (error.status === 409 && error.code === 'idempotency_key_in_use')
  if (error instanceof ResponseCutOffError || error instanceof RequestTimeoutError) return true
  // fetch's network errors are TypeErrors with the cause (refused, reset, closed); one without a
  // cause could never be sent (e.g. an API key with a newline), and an abort is not a TypeError.
  return error instanceof TypeError && error.cause !== undefined
}
