import { context, trace, TraceFlags } from '@opentelemetry/api'

/**
 * A pino mixin: the ids of the sampled span active when a line is logged, so that a log line written
 * inside a traced request or delivery can be found from its trace and the other way round. A span
 * not sampled is in no trace anyone can open: its ids would only lengthen the line.
 */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getSpanContext(context.active())
  if (span === undefined || (span.traceFlags & TraceFlags.SAMPLED) === 0) return {}
  return { trace_id: span.traceId, span_id: span.spanId }
}
