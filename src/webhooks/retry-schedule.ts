/**
 * When a failed delivery is tried again (docs/webhooks.md): after delay `failures` of
 * WEBHOOK_RETRY_SCHEDULE, ±10% so endpoints that failed together are not all retried in the same
 * instant, and never sooner than a `Retry-After` the receiver asked for. Past the end of the
 * schedule the endpoint is disabled (`retries_exhausted`).
 */

import type { AfterFailure } from '../domain/webhooks.js'

const JITTER = 0.1

/** A receiver's Retry-After is honoured up to a day (or the schedule's longest delay). */
const MAX_RETRY_AFTER_MS = 86_400_000

/**
 * What follows an attempt that failed at `now` (`failures`: the event's failed attempts before it):
 * a retry by the schedule and the receiver's `Retry-After` as received, or disabling past its end.
 */
export function afterFailure(failures: number, scheduleMs: readonly number[], retryAfter: string | undefined, now: Date): AfterFailure {
  const retryAfterMs = parseRetryAfter(retryAfter, now, Math.max(MAX_RETRY_AFTER_MS, ...scheduleMs))
  const retry = nextRetry(failures, scheduleMs, retryAfterMs)
  return retry === 'exhausted' ? { disable: 'retries_exhausted' } : { retryAt: new Date(now.getTime() + retry.retryInMs) }
}

/**
 * `failures`: failed attempts of the event before this one (0 for its first failure).
 * `random`: a number in [0, 1), Math.random unless told.
 */
export function nextRetry(
  failures: number,
  scheduleMs: readonly number[],
  retryAfterMs: number | null,
  random: () => number = Math.random,
): { retryInMs: number } | 'exhausted' {
  const delay = scheduleMs[failures]
  if (delay === undefined) return 'exhausted'
  const jittered = Math.round(delay * (1 + JITTER * (2 * random() - 1)))
  return { retryInMs: Math.max(jittered, retryAfterMs ?? 0) }
}

/**
 * A `Retry-After` value in milliseconds from `now`: delay-seconds or an HTTP date (RFC 9110
 * §10.2.3); null when absent or unreadable. Capped at `maxMs` so a receiver cannot park an
 * endpoint for a year.
 */
export function parseRetryAfter(value: string | undefined, now: Date, maxMs: number): number | null {
  if (value === undefined) return null
  const text = value.trim()
  let ms: number
  if (/^\d+$/.test(text)) ms = Number(text) * 1000
  else {
    const at = Date.parse(text)
    if (Number.isNaN(at)) return null
    ms = at - now.getTime()
  }
  return Math.min(Math.max(ms, 0), maxMs)
}
