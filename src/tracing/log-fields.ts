import { context, trace } from '@opentelemetry/api'

/**
 * A pino mixin: the ids of the span active when a line is logged, so that a log line written inside
 * a traced request or delivery can be found from its trace and the other way round.
 */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getSpanContext(context.active())
  return span === undefined ? {} : { trace_id: span.traceId, span_id: span.spanId }
}
