import { finished } from 'node:stream'
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api'
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions'
import type { FastifyInstance } from 'fastify'

/** Probed every few seconds by load balancers: a trace each would drown the rest. */
const UNTRACED = new Set(['/healthz', '/readyz'])
/**
 * The safe methods (RFC 9110 §9.2.1): such a request changes nothing, so it records no event and
 * sends no webhook, and a trace context it is not sampled in has nowhere to go.
 */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

/**
 * A SERVER span per request, after the HTTP semantic conventions: named for its route
 * (`GET /v2/store/orders/{orderId}`), continuing an incoming W3C traceparent, active in every hook
 * and handler after it (so database spans and log lines join it), ended once the response is sent
 * (a long list's sending included) or its client went away. Only a 5xx marks it as an error; a 4xx
 * is the client's, and no error message (which may quote the request) is recorded. Added before any
 * other hook, once the SDK is registered (its tracer, not the API's stand-in, is taken here).
 *
 * What is not sampled costs no more than the sampler's decision: its span records nothing, and is
 * made active only for a request that may write, so that the events it records keep its trace
 * context (sampled flag off) and their deliveries, not sampled either, pass that on. A read not
 * sampled runs outside any span, as with tracing off: it has no context to pass on, and under an
 * unsampled span no store span nor log field would have been made anyway. Its name, attributes and
 * the listener that ends it are made only once it records: the samplers the SDK configures (always,
 * ratio, parent-based) read neither name nor attributes, and a span not sampled has nothing to end.
 *
 * Our own rather than @fastify/otel's: that one marks every thrown 4xx as an error with its message
 * and stack, and ends the span before a streamed body is sent.
 */
export function traceRequests(app: FastifyInstance): void {
  const tracer = trace.getTracer('petstore-orders')
  const conventionRoute = routeNames()
  // The headers the registered propagators read (W3C: traceparent, tracestate, baggage). A request
  // with none of them continues no trace: extracting from it would only return the root context.
  const fields = propagation.fields()
  app.addHook('onRequest', (request, reply, done) => {
    const query = request.url.indexOf('?')
    const path = query === -1 ? request.url : request.url.slice(0, query)
    if (UNTRACED.has(path)) return done()
    const parent = fields.some((field) => request.headers[field] !== undefined) ? propagation.extract(ROOT_CONTEXT, request.headers) : ROOT_CONTEXT
    const span = tracer.startSpan(request.method, { kind: SpanKind.SERVER }, parent)
    if (span.isRecording()) {
      const route = conventionRoute(request.routeOptions.url)
      if (route !== undefined) span.updateName(`${request.method} ${route}`).setAttribute(ATTR_HTTP_ROUTE, route)
      span.setAttribute(ATTR_HTTP_REQUEST_METHOD, request.method).setAttribute(ATTR_URL_PATH, path)
      // Sent in full, or its client went away first (a premature close: no status).
      finished(reply.raw, (error) => end(span, error === undefined ? reply.statusCode : undefined))
    } else if (SAFE_METHODS.has(request.method)) return done()
    context.with(trace.setSpan(parent, span), done)
  })
}

/**
 * Fastify's route (`/v2/store/orders/:orderId`) as the conventions write it (`{orderId}`), worked out
 * once per route rather than once per request; none for a request no route matched (a 404).
 */
function routeNames(): (url: string | undefined) => string | undefined {
  const routes = new Map<string, string>()
  return (url) => {
    if (url === undefined) return undefined
    let route = routes.get(url)
    if (route === undefined) routes.set(url, (route = url.replace(/:(\w+)/g, '{$1}')))
    return route
  }
}

function end(span: Span, status: number | undefined): void {
  if (status === undefined) span.setAttribute(ATTR_ERROR_TYPE, 'aborted')
  else {
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status)
    if (status >= 500) span.setAttribute(ATTR_ERROR_TYPE, String(status)).setStatus({ code: SpanStatusCode.ERROR })
  }
  span.end()
}
