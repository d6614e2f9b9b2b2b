import { context, propagation, trace } from '@opentelemetry/api'
import type { TraceContext } from '../domain/trace-context.js'

export type { TraceContext }

/**
 * The trace context of the span active now, to be kept with what this write records; undefined when
 * no span is active (tracing off: then this costs one lookup, as the API without an SDK is a no-op).
 */
export function activeTraceContext(): TraceContext | undefined {
  const active = context.active()
  if (trace.getSpanContext(active) === undefined) return undefined
  const carrier: Record<string, string> = {}
  propagation.inject(active, carrier)
  const { traceparent, tracestate } = carrier
  if (traceparent === undefined) return undefined
  return tracestate === undefined || tracestate === '' ? { traceparent } : { traceparent, tracestate }
}
