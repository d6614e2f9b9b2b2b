import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
} from '@opentelemetry/semantic-conventions'
import { traceContextOf, type TraceContext } from '../trace-context.js'
import type { DeliveryResult } from './delivery.js'

const tracer = trace.getTracer('petstore-orders')

export interface DeliveryTrace {
  /** `webhook delivery` (an event of the feed) or `webhook ping`. */
  name: string
  url: string
  endpointId: bigint
  /** Its webhook-id: the event's position, or the ping's own id. */
  eventId: string
  /**
   * The trace it joins: the context kept with the event, that of the write that recorded it; null
   * when there is none (an event written by the CLI or import), for a trace of its own; undefined:
   * the context active now (a ping sent by a request).
   */
  parent?: TraceContext | null
}

/**
 * One attempt as a CLIENT span, whose context `send` puts on the request as `traceparent` (and
 * `tracestate`), and nothing else of the context (traceContextOf): a receiver that traces continues
 * the trace of the change that caused the event. The headers are not signed (Standard Webhooks
 * signs the id, the timestamp and the body), so adding them changes no signature. Its attributes
 * hold no URL (it may carry credentials), body or secret: the server's host and port, the endpoint,
 * the event, the status or the attempt's error phrase. With tracing off the span is the API's no-op
 * and no header is added. `within` runs what follows from the attempt in its context, so that its
 * log lines name the attempt's trace and span.
 */
export async function traceDelivery(
  attempt: DeliveryTrace,
  send: (traceHeaders: Record<string, string>) => Promise<DeliveryResult>,
): Promise<{ result: DeliveryResult; within: <T>(run: () => T) => T }> {
  const parent =
    attempt.parent === undefined ? context.active() : attempt.parent === null ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, attempt.parent)
  const span = tracer.startSpan(attempt.name, { kind: SpanKind.CLIENT }, parent)
  // Only for a span that is recorded: off, or not sampled, the URL is not parsed.
  if (span.isRecording()) {
    span.setAttributes({
      [ATTR_HTTP_REQUEST_METHOD]: 'POST',
      'webhook.endpoint.id': attempt.endpointId.toString(),
      'webhook.event.id': attempt.eventId,
    })
    const server = URL.canParse(attempt.url) ? new URL(attempt.url) : undefined
    if (server !== undefined) {
      span.setAttributes({ [ATTR_SERVER_ADDRESS]: server.hostname, [ATTR_SERVER_PORT]: Number(server.port || (server.protocol === 'https:' ? 443 : 80)) })
    }
  }
  const active = trace.setSpan(parent, span)
  // The trace context alone (never the caller's baggage), tracestate within the W3C limits.
  const headers: Record<string, string> = { ...traceContextOf(active) }
  let result: DeliveryResult
  try {
    result = await context.with(active, () => send(headers))
  } catch (error) {
    span.setAttribute(ATTR_ERROR_TYPE, 'internal').setStatus({ code: SpanStatusCode.ERROR })
    span.end()
    throw error
  }
  if (result.status !== null) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, result.status)
  if (result.outcome !== 'success') span.setAttribute(ATTR_ERROR_TYPE, result.error ?? result.outcome).setStatus({ code: SpanStatusCode.ERROR })
  span.end()
  // What is done about the attempt (a failure recorded, an endpoint disabled) logs in its trace.
  return { result, within: (run) => context.with(active, run) }
}
