import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api'
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions'
import type { FastifyInstance, FastifyRequest } from 'fastify'

const tracer = trace.getTracer('petstore-orders')
/** The spans of the requests under way that are recorded: only those have anything to end. */
const spans = new WeakMap<FastifyRequest, Span>()
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
 * (a long list's sending included). Only a 5xx marks it as an error; a 4xx is the client's, and no
 * error message (which may quote the request) is recorded. Added before any other hook.
 *
 * What is not sampled costs no more than the sampler's decision: its span records nothing, and is
 * made active only for a request that may write, so that the events it records keep its trace
 * context (sampled flag off) and their deliveries, not sampled either, pass that on. A read not
 * sampled runs outside any span, as with tracing off: it has no context to pass on, and under an
 * unsampled span no store span nor log field would have been made anyway.
 *
 * Our own rather than @fastify/otel's: that one marks every thrown 4xx as an error with its message
 * and stack, and ends the span before a streamed body is sent.
 */
export function traceRequests(app: FastifyInstance): void {
  const conventionRoute = routeNames()
  app.addHook('onRequest', (request, _reply, done) => {
    const query = request.url.indexOf('?')
    const path = query === -1 ? request.url : request.url.slice(0, query)
    if (UNTRACED.has(path)) return done()
    const route = conventionRoute(request.routeOptions.url)
    const parent = propagation.extract(ROOT_CONTEXT, request.headers)
    // Its attributes once it records: the samplers the SDK configures (always, ratio, parent-based)
    // read none, and a span not sampled would only build and check them to drop them.
    const span = tracer.startSpan(route === undefined ? request.method : `${request.method} ${route}`, { kind: SpanKind.SERVER }, parent)
    if (span.isRecording()) {
      span.setAttribute(ATTR_HTTP_REQUEST_METHOD, request.method).setAttribute(ATTR_URL_PATH, path)
      if (route !== undefined) span.setAttribute(ATTR_HTTP_ROUTE, route)
      spans.set(request, span)
      // A client that went away before its response was sent (Fastify's onRequestAbort test, but
      // only for a request that has a span to end: that hook would listen on every request).
      request.raw.once('close', () => {
        if (request.raw.aborted) end(request, undefined)
      })
    } else if (SAFE_METHODS.has(request.method)) return done()
    context.with(trace.setSpan(parent, span), done)
  })
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode)
    done()
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

function end(request: FastifyRequest, status: number | undefined): void {
  const span = spans.get(request)
  if (span === undefined) return
  spans.delete(request)
  if (status === undefined) span.setAttribute(ATTR_ERROR_TYPE, 'aborted')
  else {
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status)
    if (status >= 500) span.setAttribute(ATTR_ERROR_TYPE, String(status)).setStatus({ code: SpanStatusCode.ERROR })
  }
  span.end()
}
