import { context, ROOT_CONTEXT, SpanStatusCode, trace, type Span } from '@opentelemetry/api'

const tracer = trace.getTracer('petstore-orders')

/** The span active when a request joined a batch; undefined when none is (tracing off, or outside a trace). */
export function activeSpan(): Span | undefined {
  const span = trace.getActiveSpan()
  return span?.isRecording() === true ? span : undefined
}

/**
 * Runs a batch's commit in a span of its own, when any of its requests is traced: a child of the
 * first traced request, linked from and to every other, so that each request's trace shows the
 * commit its write was made durable by (and the statements under it). `settle` ends the span, once
 * the commit is over. Without a traced request: `commit` alone, no span.
 */
export function traceBatch<T>(requests: readonly (Span | undefined)[], commit: () => T): { result: T; settle: (error?: unknown) => void } {
  const traced = requests.filter((span): span is Span => span !== undefined)
  const first = traced[0]
  if (first === undefined) return { result: commit(), settle: () => {} }
  const span = tracer.startSpan(
    'group commit',
    {
      attributes: { 'db.operation.batch.size': requests.length },
      links: traced.slice(1).map((other) => ({ context: other.spanContext() })),
    },
    trace.setSpan(ROOT_CONTEXT, first),
  )
  for (const other of traced.slice(1)) other.addLink({ context: span.spanContext() })
  const settle = (error?: unknown): void => {
    if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR })
    span.end()
  }
  try {
    return { result: context.with(trace.setSpan(ROOT_CONTEXT, span), commit), settle }
  } catch (error) {
    settle(error)
    throw error
  }
}
