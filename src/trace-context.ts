import { context, propagation, trace, type Context } from '@opentelemetry/api'

/**
 * A W3C trace context (https://www.w3.org/TR/trace-context/) as it travels in headers. An order
 * event keeps the one of the write that recorded it, so that its deliveries join that trace.
 *
 * Read from OpenTelemetry's API alone, never its SDK: without an SDK registered (tracing off) the
 * API is a no-op, so the store and the webhooks take it from here whether tracing is on or not.
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

/**
 * The W3C trace context of `active`, as it is passed on (to a webhook receiver, or kept with an
 * event for its deliveries): `traceparent` and `tracestate` within the W3C limits, nothing else.
 * The SDK's propagator also writes `baggage`, the caller's as it came: a receiver is another party,
 * so it is never passed on. Undefined when there is no traceparent (no span, or tracing off).
 */
export function traceContextOf(active: Context): TraceContext | undefined {
  const carrier: Record<string, string> = {}
  propagation.inject(active, carrier)
  const { traceparent } = carrier
  if (traceparent === undefined) return undefined
  const tracestate = boundedTracestate(carrier.tracestate ?? '')
  return tracestate === '' ? { traceparent } : { traceparent, tracestate }
}

/**
 * The trace context of the span active now, to be kept with what this write records; undefined when
 * no span is active (tracing off: then this costs one lookup, as the API without an SDK is a no-op).
 */
export function activeTraceContext(): TraceContext | undefined {
  const active = context.active()
  if (trace.getSpanContext(active) === undefined) return undefined
  return traceContextOf(active)
}
