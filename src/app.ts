import swagger from '@fastify/swagger'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyReply } from 'fastify'
import type { Config } from './config.js'
import { ApiError } from './errors.js'
import { OutageLog } from './outage-log.js'
import { EventWaiters } from './events/event-waiters.js'
import type { ApiApp } from './http/api-app.js'
import { admission } from './http/admission.js'
import { Authenticator } from './http/authenticator.js'
import { clientErrorResponse, registerErrorHandling, registerMethodNotAllowed, sendError } from './http/error-handling.js'
import { int64ParamsValidator } from './http/int64-params.js'
import { parseJsonBody } from './http/json-body.js'
import { Metrics } from './http/metrics.js'
import { openApiDocument } from './http/openapi.js'
import { openApiV2Document, SWAGGER_V2 } from './http/openapi-v2.js'
import { memoryCounters, RateLimiter } from './http/rate-limiter.js'
import { requestId } from './http/request-id.js'
import { shorten } from './http/shorten.js'
import { docsRoutes } from './http/routes/docs.js'
import { healthRoutes } from './http/routes/health.js'
import { ordersRoutes } from './http/routes/orders.js'
import { petsRoutes } from './http/routes/pets.js'
import { cancelOrderV2Route } from './http/routes/v2/cancel-order.js'
import { completeOrderRoute } from './http/routes/v2/complete-order.js'
import { orderEventsRoute } from './http/routes/v2/order-events.js'
import { ordersV2Routes } from './http/routes/v2/orders.js'
import { placeOrderRoute } from './http/routes/v2/place-order.js'
import { shipOrderRoute } from './http/routes/v2/ship-order.js'
import { BODY_MUST_BE_JSON, MERGE_PATCH_MEDIA_TYPE } from './http/strict-body.js'
import { updateOrderRoute } from './http/routes/v2/update-order.js'
import { webhookEndpointActionsRoutes } from './http/routes/v2/webhook-endpoint-actions.js'
import { webhookEndpointsRoutes } from './http/routes/v2/webhook-endpoints.js'
import { ErrorSchema } from './schemas/error.js'
import { Order } from './schemas/order.js'
import { OrderEvent } from './schemas/order-event.js'
import { OrderV2 } from './schemas/order-v2.js'
import { Pet } from './schemas/pet.js'
import {
  WebhookAttempt,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEndpointCreated,
  WebhookPingResult,
  WebhookSecret,
} from './schemas/webhook-endpoint.js'
import { StoreUnavailableError, type Store } from './store/store.js'
import { traceRequests } from './tracing/server-spans.js'
import { Deliverer } from './webhooks/delivery.js'

export interface AppOptions {
  config: Config
  store: Store
  /** A pino logger; none by default (tests). */
  logger?: FastifyBaseLogger
  /** Process-wide metrics (event loop, memory): on for the server, off for the many apps of tests. */
  processMetrics?: boolean
  /**
   * What sends webhook pings (the server's, shared with its dispatcher, stays the server's to close).
   * Without one, the app makes one from `config.webhooks` and closes it when it closes.
   */
  deliverer?: Pick<Deliverer, 'deliver'> | undefined
  /** A server span per request (tracing/server-spans.ts): with tracing on. */
  traced?: boolean
}

// A metadata filter's value of 500 characters beyond the BMP is 6,000 bytes percent-encoded: it fits,
// with the rest of a list's query. Three such values at once (18 KB) do not; ASCII ones do.
const MAX_URL_LENGTH = 8192
const SECURITY_HEADERS = { 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' }
const BODY_LIMIT = 16 * 1024 // v2's bodies are a few short fields

/** The HTTP application, ready to `listen` or `inject`. It does not own the store's lifecycle. */
export async function buildApp({ config, store, logger, processMetrics = false, deliverer, traced = false }: AppOptions): Promise<ApiApp> {
  const app = Fastify({
    ...(logger === undefined ? { logger: false } : { loggerInstance: logger }),
    genReqId: requestId,
    // Path parameters, query strings, bodies and named headers strictly (int64-params.ts); the rest by Ajv.
    schemaController: { compilersFactory: { buildValidator: int64ParamsValidator } },
    // One log line per request (below) instead of Fastify's two: half the logging cost per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    trustProxy: config.trustProxy, // request.ip: the client's address as the trusted proxies give it
    routerOptions: { maxParamLength: 256 }, // long ids reach the int64 validator (400), not a 404
    // Bad percent-encoding in the URL is caught before routing (and before the onRequest hook that
    // sets these headers); answer it with an Error body too.
    frameworkErrors: (error, request, reply) => {
      void sendError(error, request, (reply as FastifyReply).headers({ ...SECURITY_HEADERS, 'x-request-id': request.id }))
    },
    // While draining, requests that still arrive on open connections are served (with Connection:
    // close) rather than refused with Fastify's own 503 body, which is not an Error.
    return503OnClosing: false,
    clientErrorHandler: clientErrorResponse,
    http: {
      headersTimeout: config.http.headersTimeoutMs,
      // Also given here, at the server's creation, where Node checks headersTimeout against it:
      // against its own default (300 s) a longer headers timeout would not start.
      requestTimeout: config.http.requestTimeoutMs,
      maxHeaderSize: config.http.maxHeaderSize,
      // How often Node checks the two timeouts above (default 30 s, which would let slow clients
      // hold sockets for far longer than the timeouts say).
      connectionsCheckingInterval: 1000,
    },
    requestTimeout: config.http.requestTimeoutMs, // Fastify sets it on the server itself
    keepAliveTimeout: config.http.keepAliveTimeoutMs,
    connectionTimeout: config.http.idleTimeoutMs, // a socket with no traffic either way is closed
  }).withTypeProvider<TypeBoxTypeProvider>()

  // First, so that the span is active in every other hook.
  if (traced) traceRequests(app)
  // Every open socket costs a descriptor and memory, whatever the timeouts: bound how many there are.
  app.server.maxConnections = config.http.maxConnections
  // The event feed's held long polls: answered at once when the app closes (preClose runs before
  // the server waits for in-flight requests), so a deploy drains without waiting out a wait.
  const waiters = new EventWaiters(() => store.orders.dataVersion(), {
    maxWaiting: config.events.maxWaiting,
    onError: (error) =>
      error instanceof StoreUnavailableError
        ? app.databaseOutage.failed(error)
        : app.log.warn({ err: error }, 'event feed: reading the data version failed; held requests wait on'),
  })
  app.addHook('preClose', async () => waiters.close())
  const metrics = new Metrics({ processMetrics, eventWaiters: () => waiters.size })
  const authenticator = new Authenticator((hash) => store.apiKeys.findByHash(hash), config.keyCacheTtlMs)
  const counters = { perKey: memoryCounters(), authFailures: memoryCounters() }
  if (config.rateLimit.redisUrl !== undefined) {
    const { RedisCounters } = await import('./http/redis-counter-store.js')
    const redis = new RedisCounters(config.rateLimit.redisUrl, config.rateLimit.redisPrefix, app.log)
    app.addHook('onClose', () => redis.close())
    await redis.ready()
    counters.perKey = redis.store(counters.perKey)
    counters.authFailures = redis.store(counters.authFailures)
  }
  const limiter = new RateLimiter(config.rateLimit, counters)
  // Webhook pings go through the deliverer given (its owner closes it), or through the app's own.
  const own = deliverer === undefined ? new Deliverer(config.webhooks) : undefined
  if (own !== undefined) app.addHook('onClose', async () => own.close())
  app.decorate('config', config)
  app.decorate('store', store)
  app.decorate('metrics', metrics)
  app.decorate(
    'databaseOutage',
    new OutageLog(app.log, { failing: 'the database is unavailable; requests that need it get 503 until it answers', answering: 'the database answers again' }),
  )
  app.decorateRequest('apiKey', null)
  app.decorate('requireScope', admission(authenticator, limiter))

  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJsonBody)

  registerErrorHandling(app)
  // Every path's methods, /metrics' too, so that every other method on it is a 405 with Allow (below).
  const methodsByUrl = new Map<string, Set<string>>()
  app.addHook('onRoute', (route) => {
    const methods = methodsByUrl.get(route.url) ?? new Set<string>()
    for (const method of [route.method].flat()) methods.add(method)
    methodsByUrl.set(route.url, methods)
  })
  // Callback hooks, here and below: on every request, an async hook's promise is a measurable cost.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    reply.headers(SECURITY_HEADERS)
    done(request.url.length > MAX_URL_LENGTH ? new ApiError('uri_too_long') : undefined)
  })
  metrics.register(app)
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info(
      { method: request.method, url: shorten(request.url), status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 },
      'request',
    )
    done()
  })

  for (const schema of [Order, OrderV2, OrderEvent, Pet, ErrorSchema]) app.addSchema(schema)
  for (const schema of [WebhookEndpoint, WebhookEndpointCreated, WebhookSecret, WebhookAttempt, WebhookPingResult, WebhookDelivery]) app.addSchema(schema)
  await app.register(swagger, openApiDocument(config))

  healthRoutes(app)
  docsRoutes(app, config) // GET /docs: the API reference, public
  await app.register(
    async (v1) => {
      const api = v1 as unknown as ApiApp
      ordersRoutes(api)
      petsRoutes(api)
      api.get('/openapi.json', { schema: { hide: true } }, async (_request, reply) =>
        reply.header('cache-control', 'public, max-age=300').send(app.swagger()),
      )
    },
    { prefix: '/v1' },
  )
  await app.register(
    async (v2) => {
      await v2.register(swagger, openApiV2Document(config)) // a document of its own, from the routes below
      // A JSON Merge Patch is JSON, in v2, for a PATCH only: sent to any other write it is 415, before
      // its text is parsed, whatever it holds.
      v2.addContentTypeParser(MERGE_PATCH_MEDIA_TYPE, { parseAs: 'buffer' }, (request, body: Buffer, done) =>
        request.method === 'PATCH' ? parseJsonBody(request, body, done) : done(new ApiError('unsupported_media_type', BODY_MUST_BE_JSON), undefined),
      )
      const api = v2 as unknown as ApiApp
      ordersV2Routes(api)
      placeOrderRoute(api)
      cancelOrderV2Route(api)
      shipOrderRoute(api)
      updateOrderRoute(api)
      completeOrderRoute(api)
      orderEventsRoute(api, waiters, authenticator)
      webhookEndpointsRoutes(api)
      webhookEndpointActionsRoutes(api, deliverer ?? own!)
      api.get('/openapi.json', { schema: { hide: true } }, async (_request, reply) =>
        reply.header('cache-control', 'public, max-age=300').send((v2 as unknown as Record<string, () => unknown>)[SWAGGER_V2]!()),
      )
    },
    { prefix: '/v2' },
  )
  for (const [url, methods] of [...methodsByUrl]) registerMethodNotAllowed(app, url, [...methods])
  return app as unknown as ApiApp
}
