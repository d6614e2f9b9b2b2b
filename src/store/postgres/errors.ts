import { StoreUnavailableError } from '../store.js'

// Socket-level failures: the server is down, unreachable, or the connection was cut.
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
])

/**
 * SQLSTATEs that mean "the database cannot serve this now", not "this request is wrong":
 * class 08 (connection exception) and 53 (insufficient resources: too many connections, disk full,
 * out of memory), 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now (starting
 * up, recovering), 57P05 idle session timeout, and 25006 (a read-only transaction: after a failover
 * the URL can lead to a standby for a while; the SQLite store likewise treats READONLY as unavailable).
 */
const UNAVAILABLE_SQLSTATE = /^(08...|53...|57P0[1235]|25006)$/

// What pg and pg-pool say, without a code, when a connection is lost, never made, or not given in
// time, or a statement got no answer within its query_timeout ("Query read timeout").
const UNAVAILABLE_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable|Client was closed and is not queryable|Query read timeout)/

/** Whether an error (or its cause, or one of an AggregateError's errors) means the database is unavailable. */
export function isUnavailable(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 4) return false
  if (error instanceof StoreUnavailableError) return true
  const { code, message, cause, errors } = error as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown }
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return true
  if (typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message)) return true
  if (Array.isArray(errors) && errors.some((e) => isUnavailable(e, depth + 1))) return true
  return cause !== undefined && isUnavailable(cause, depth + 1)
}

/**
 * The error to throw for a driver error: StoreUnavailableError when the database is unavailable,
 * naming the server (host:port) when known, else the error itself.
 */
export function toStoreError(error: unknown, server?: string): unknown {
  if (error instanceof StoreUnavailableError || !isUnavailable(error)) return error
  const { code, message } = error as { code?: unknown; message?: unknown }
  const reason = typeof code === 'string' ? code : typeof message === 'string' ? message : 'unknown error'
  const where = server === undefined ? 'PostgreSQL' : `PostgreSQL at ${server}`
  return new StoreUnavailableError(`${where} is unavailable (${reason})`, { cause: error })
}

/**
 * A lost connection rather than a failure to get one: the statement may have reached a server that
 * has since gone (terminated backend, restart, failover), so a fresh connection can succeed at once.
 */
export function isLostConnection(error: unknown): boolean {
  const cause = error instanceof StoreUnavailableError ? error.cause : error
  if (typeof cause !== 'object' || cause === null) return false
  const { code, message } = cause as { code?: unknown; message?: unknown }
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === '57P01' || code === '57P02' || code === '57P05') return true
  return typeof message === 'string' && /^(Connection terminated unexpectedly|Client has encountered a connection error)/.test(message)
}
