/**
 * A W3C trace context (https://www.w3.org/TR/trace-context/) as it travels in headers. An order
 * event keeps the one of the write that recorded it, so that its deliveries join that trace.
 */
export interface TraceContext {
  traceparent: string
  tracestate?: string
}

/** W3C Trace Context's limits on `tracestate` (§3.3.1.5): list members, and characters in all. */
export const TRACESTATE_MAX_MEMBERS = 32
export const TRACESTATE_MAX_LENGTH = 512

/**
 * `tracestate` within the W3C limits: its members in order, blank ones left out, as many as fit in
 * TRACESTATE_MAX_MEMBERS and TRACESTATE_MAX_LENGTH; what is over is dropped from the end (the
 * specification's choice: the rightmost members are the oldest). '' when none is left.
 */
export function boundedTracestate(value: string): string {
  const kept: string[] = []
  let length = 0
  for (const member of value.split(',')) {
    const trimmed = member.trim()
    if (trimmed === '') continue
    const next = length + (kept.length > 0 ? 1 : 0) + trimmed.length
    if (kept.length === TRACESTATE_MAX_MEMBERS || next > TRACESTATE_MAX_LENGTH) break
    kept.push(trimmed)
    length = next
  }
  return kept.join(',')
}
