import { context, propagation, trace, type Context } from '@opentelemetry/api'
import { boundedTracestate, type TraceContext } from '../domain/trace-context.js'

export type { TraceContext }

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
