/**
 * A W3C trace context (https://www.w3.org/TR/trace-context/) as it travels in headers. An order
 * event keeps the one of the write that recorded it, so that its deliveries join that trace.
 */
export interface TraceContext {
  traceparent: string
  tracestate?: string
}
