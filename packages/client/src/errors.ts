import type { ErrorCode, ErrorCodeV2 } from './api-types.js'

/**
 * A call that failed: the server answered with an error status (then `code` and `message` are those
 * of its Error body), or with a response the client cannot read (`code` is `unexpected_response`).
 * A request that got no response at all (network down, aborted) rejects with fetch's own error,
 * or with a {@link RequestTimeoutError} when none came in time.
 */
export class PetstoreApiError extends Error {
  /** The HTTP status of the response. */
  readonly status: number
  /** The Error body's code; `unexpected_response` when the response was not what the API sends. */
  readonly code: ErrorCode | ErrorCodeV2 | 'unexpected_response' | (string & Record<never, never>)
  /** The `X-Request-Id` of the response: quote it when reporting a problem. */
  readonly requestId: string | undefined
  /** Seconds to wait before retrying, from `Retry-After` (429, 503). */
  readonly retryAfter: number | undefined

  constructor(status: number, code: string, message: string, headers?: Headers) {
    super(message)
    this.name = 'PetstoreApiError'
    this.status = status
    this.code = code
    this.requestId = headers?.get('x-request-id') ?? undefined
    const retryAfter = headers?.get('retry-after') ?? ''
    this.retryAfter = /^[0-9]+$/.test(retryAfter) ? Number(retryAfter) : undefined
  }
}

/** A response the client cannot read, as an `unexpected_response` saying what was wrong with it. */
export function unexpected(response: Response, message: string): PetstoreApiError {
  return new PetstoreApiError(response.status, 'unexpected_response', message, response.headers)
}

/**
 * A request whose response did not begin within the client's `timeoutMs`: the server (or a proxy
 * before it) took the connection but answered nothing. Whether the request took effect is unknown;
 * placeOrder retries it with the same Idempotency-Key.
 */
export class RequestTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no response within ${timeoutMs} ms`)
    this.name = 'RequestTimeoutError'
  }
}
