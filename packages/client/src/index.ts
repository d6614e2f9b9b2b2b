/**
 * The TypeScript client of the Petstore Orders API: `import { createClient, createV2Client } from
 * '@petstore-orders/client'`. `createClient` speaks v1 to a server URL ending in `/v1`;
 * `createV2Client` speaks v2 (beta) to one ending in `/v2`.
 *
 * Its types come from the OpenAPI documents the service serves (./openapi-types.ts and
 * ./openapi-v2-types.ts, generated). int64
 * ids are `bigint`, exact to the last digit: responses are parsed with lossless-json, never through a
 * JS `number` (exact only up to 2^53). It needs nothing but `fetch` (Node.js 20+, or any runtime
 * that has it).
 */
import { isInteger, isLosslessNumber, parse, stringify } from 'lossless-json'
import { v7 as uuidv7 } from 'uuid'
import type { components, operations } from './openapi-types.js'
import type { components as componentsV2, operations as operationsV2 } from './openapi-v2-types.js'

/** An order, as listOrders returns it. A field whose value is not known is absent. */
export type Order = components['schemas']['Order']
/** The body of every error response. */
export type ErrorBody = components['schemas']['Error']
/** The codes of the API's errors (README "Error codes"). */
export type ErrorCode = ErrorBody['code']

export interface ClientOptions {
  /**
   * A server of the API: its URL ends in the version, as the `servers` of each document do. For
   * `createClient`, `https://api.petstore.example/v1` or `http://127.0.0.1:8080/v1`; for
   * `createV2Client`, the same ending in `/v2`.
   */
  baseUrl: string | URL
  /** An API key (`pso_…`), sent as `Authorization: Bearer <apiKey>`. */
  apiKey: string
  /** The fetch to use; the global one by default. */
  fetch?: typeof globalThis.fetch
}

export interface RequestOptions {
  signal?: AbortSignal
}

export interface PetstoreClient {
  /** Every order that is not cancelled, in ascending id order (GET /store/orders). */
  listOrders(options?: RequestOptions): Promise<Order[]>
  /**
   * Cancels a pending order (DELETE /store/orders/{orderId}). Resolves once the cancellation is
   * durable. A shipped order rejects with 409 `order_already_shipped`; an unknown or already
   * cancelled one with 404 `order_not_found`. The id is a bigint or its decimal string.
   */
  cancelOrder(id: bigint | string, options?: RequestOptions): Promise<void>
}

/**
 * A call that failed: the server answered with an error status (then `code` and `message` are those
 * of its Error body), or with a response the client cannot read (`code` is `unexpected_response`).
 * A request that got no response at all (network down, aborted) rejects with fetch's own error.
 */
export class PetstoreApiError extends Error {
  /** The HTTP status of the response. */
  readonly status: number
  /** The Error body's code; `unexpected_response` when the response was not what the API sends. */
  readonly code: ErrorCode | ErrorCodeV2 | 'unexpected_response' | (string & Record<never, never>)
  /** The `X-Request-Id` of the response: quote it when reporting a problem. */
  readonly requestId: string | undefined
  /** Seconds to wait before retrying, from `Retry-After` (429, 503). */
  readonly retryAfter: number | undefined

  constructor(status: number, code: string, message: string, headers?: Headers) {
    super(message)
    this.name = 'PetstoreApiError'
    this.status = status
    this.code = code
    this.requestId = headers?.get('x-request-id') ?? undefined
    const retryAfter = headers?.get('retry-after') ?? ''
    this.retryAfter = /^[0-9]+$/.test(retryAfter) ? Number(retryAfter) : undefined
  }
}

type ListOrdersResponse = operations['listOrders']['responses'][200]['content']['application/json']
type CancelOrderId = operations['cancelOrder']['parameters']['path']['orderId']

type Call = (
  method: string,
  path: string,
  signal: AbortSignal | undefined,
  body?: unknown,
  extraHeaders?: Record<string, string>,
) => Promise<Response>

/** Sends requests to one server of one version: the key, JSON, errors as PetstoreApiError. */
function caller(options: ClientOptions, version: 'v1' | 'v2'): Call {
  const base = serverUrl(options.baseUrl, version)
  if (typeof options.apiKey !== 'string' || options.apiKey === '') throw new TypeError('apiKey: an API key is required')
  const fetchImpl = options.fetch ?? globalThis.fetch
  const headers = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json' }
  const jsonHeaders = { ...headers, 'content-type': 'application/json' }

  return async (method, path, signal, body, extraHeaders) => {
    // lossless-json writes a bigint as a JSON integer, every digit (JSON.stringify refuses one).
    const init: RequestInit =
      body === undefined
        ? { method, headers: { ...headers, ...extraHeaders }, signal, redirect: 'error' }
        : { method, headers: { ...jsonHeaders, ...extraHeaders }, body: stringify(body) ?? 'null', signal, redirect: 'error' }
    const response = await fetchImpl(new URL(path, base), init)
    if (!response.ok) throw await errorOf(response)
    return response
  }
}

export function createClient(options: ClientOptions): PetstoreClient {
  const call = caller(options, 'v1')

  return {
    async listOrders({ signal } = {}) {
      const response = await call('GET', 'store/orders', signal)
      const orders: ListOrdersResponse = decodeOrders(await readJson(response), response)
      return orders
    },

    async cancelOrder(id, { signal } = {}) {
      const orderId: CancelOrderId | string = id
      if (typeof orderId !== 'bigint' && typeof orderId !== 'string') {
        // A JS number is exact only up to 2^53: refusing it is the only way not to cancel the wrong order.
        throw new TypeError('cancelOrder: the id must be a bigint or a decimal string')
      }
      const response = await call('DELETE', `store/orders/${encodeURIComponent(orderId.toString())}`, signal)
      await response.body?.cancel()
    },
  }
}

// ---- v2 (beta) ----

/** An order as v2 shows it: the v1 fields, its `status`, and on a cancelled order when and why. */
export type OrderV2 = componentsV2['schemas']['Order']
export type OrderStatus = OrderV2['status']
export type CancellationReason = NonNullable<OrderV2['cancellationReason']>
/** The codes of v2's errors: v1's, those of pages (`invalid_parameter`, `invalid_cursor`) and of the event feed (`events_expired`). */
export type ErrorCodeV2 = componentsV2['schemas']['Error']['code']
/** A page of the v2 list: `nextCursor` is present exactly when more matching orders follow. */
export type OrderPage = operationsV2['listOrders']['responses'][200]['content']['application/json']

/** The filters of the v2 list; every one given must match. By default, the orders not cancelled. */
export interface OrderFilters {
  /** The statuses to include (default `['pending', 'shipped']`). */
  status?: readonly OrderStatus[]
  /** Only this pet's orders: a bigint or its decimal string. */
  petId?: bigint | string
  /** Only fulfilled (`true`) or unfulfilled (`false`) orders. */
  complete?: boolean
  /** Only orders shipping at or after this instant (a Date or an RFC 3339 date-time). */
  shipDateFrom?: Date | string
  /** Only orders shipping before this instant, which must be later than `shipDateFrom`. */
  shipDateTo?: Date | string
}

export interface PageOptions extends OrderFilters, RequestOptions {
  /** How many orders the page holds at most, 1–1000 (the server's default is 100). */
  limit?: number
  /** The `nextCursor` of the previous page, fetched with the same filters. */
  cursor?: string
}

export interface IterateOptions extends OrderFilters, RequestOptions {
  /** How many orders each request fetches, 1–1000 (the server's default is 100). */
  pageSize?: number
}

export interface CancelOptions extends RequestOptions {
  /** Why the order is cancelled; recorded with the first cancellation only. */
  reason?: CancellationReason
}

/** The order to place: `petId` and `quantity` (1–1000) required, `shipDate` optional. */
export interface PlaceOrderBody {
  /** The pet: a bigint or its decimal string (a JS number is exact only up to 2^53, so it is refused). */
  petId: bigint | string
  /** 1–1000. */
  quantity: number
  /** When it is to ship: a Date or an RFC 3339 date-time. */
  shipDate?: Date | string
}

export interface PlaceOptions extends RequestOptions {
  /**
   * The request's Idempotency-Key, 1–255 visible ASCII characters, scoped to the API key. Give one
   * kept with the order's origin (a cart, a message) to retry beyond this call, e.g. after a crash:
   * within the server's `IDEMPOTENCY_KEY_TTL_HOURS` (default 24), the same key and body never place
   * a second order. Default: a new UUIDv7 for this call (a time-ordered UUID: see `placeOrder`).
   */
  idempotencyKey?: string
  /** How many requests the call sends at most, 1–10 (default 5): the first and its retries. */
  maxAttempts?: number
  /** Called before each retry with the failure, the key and the delay; it may throw to give up. */
  onRetry?: (retry: PlaceRetry) => void
}

/** A failed request of `placeOrder` that will be retried with the same key. */
export interface PlaceRetry {
  /** A PetstoreApiError (5xx, 409 `idempotency_key_in_use`), or the error of a request that got no full response. */
  error: unknown
  /** 1 for the first retry. */
  attempt: number
  /** How long until the retry: `Retry-After` when the response had one, else the backoff. */
  delayMs: number
  /** The Idempotency-Key every attempt of this call sends. */
  idempotencyKey: string
}

export interface PetstoreV2Client {
  /** One page of the orders matching the filters, ascending id (GET /store/orders). */
  listOrdersPage(options?: PageOptions): Promise<OrderPage>
  /**
   * Every order matching the filters, ascending id, one page after another as the loop asks for
   * them (`for await (const order of client.orders({ status: ['pending'] }))`). A walk while orders
   * change never yields an order twice and never skips one that matched the filters throughout.
   */
  orders(options?: IterateOptions): AsyncIterableIterator<OrderV2>
  /** One order, cancelled ones included (GET /store/orders/{orderId}); unknown: 404 `order_not_found`. */
  getOrder(id: bigint | string, options?: RequestOptions): Promise<OrderV2>
  /**
   * Cancels an order (POST /store/orders/{orderId}/cancel) and resolves with it once the
   * cancellation is durable. Safe to retry: an order already cancelled resolves with the order as it
   * stands (the first cancellation's time and reason). A shipped order rejects with 409
   * `order_already_shipped`, an unknown one with 404 `order_not_found`. A key without
   * `orders:read` is not shown the order: the cancel is done all the same, and it resolves with
   * `undefined` (the server's 204).
   */
  cancelOrder(id: bigint | string, options?: CancelOptions): Promise<OrderV2 | undefined>
  /**
   * Places an order (POST /store/orders, scope `orders:write`) and resolves with it, as placed,
   * once it is durable: `pending`, not complete, its id given by the server.
   *
   * Every request carries an `Idempotency-Key` (`options.idempotencyKey`, else a UUIDv7 made for
   * this call: its first 48 bits are the time, so the server stores it where it stores the keys
   * just before it), and the call's own retries reuse it, so one call never places two orders: a
   * request that got no response (refused, reset, a response cut off), a 5xx, and 409
   * `idempotency_key_in_use` (the first request with the key is still being processed) are retried,
   * after `Retry-After` when the response gives one, else after a jittered backoff doubling from
   * 100 ms to 5 s, `maxAttempts` times in all (default 5). Any other error rejects at once: 400
   * `invalid_body`, 401, 403, 415, 422 `idempotency_key_reused` (the key was used with another
   * body), 409 `order_ids_exhausted`, 429. When the server answers a retry with the first
   * response again (`Idempotent-Replayed: true`), that order is what the call resolves with: the
   * caller is not told, as the outcome is the same.
   */
  placeOrder(order: PlaceOrderBody, options?: PlaceOptions): Promise<OrderV2>
  /**
   * Ships a pending order (POST /store/orders/{orderId}/ship, scope `orders:write`) and resolves
   * with it once durable, `shippedAt` set. Safe to retry: an order already shipped resolves as it
   * stands. Cancelled: 409 `order_cancelled`; unknown: 404 `order_not_found`. A key without
   * `orders:read` is not shown the order: the ship is done all the same, and it resolves with
   * `undefined` (the server's 204).
   */
  shipOrder(id: bigint | string, options?: RequestOptions): Promise<OrderV2 | undefined>
  /**
   * Completes a shipped order (POST /store/orders/{orderId}/complete, scope `orders:write`):
   * `complete` true, `completedAt` set, once durable. Safe to retry: an order already complete
   * resolves as it stands. Pending: 409 `order_not_shipped`; cancelled: 409 `order_cancelled`;
   * unknown: 404 `order_not_found`. A key without `orders:read`: `undefined` (the server's 204).
   */
  completeOrder(id: bigint | string, options?: RequestOptions): Promise<OrderV2 | undefined>
  /**
   * Follows the order event feed (GET /store/order-events, experimental): every event after
   * `after`, in the order they were committed, then every later one as it happens — the loop never
   * ends by itself (`for await (const event of client.events({ after: saved }))`).
   *
   * Each request is a long poll (`wait`, default 20 s): the server holds it until an event follows
   * the cursor, so a new event arrives within about a second of its commit. The next request resumes
   * from the previous response's `nextCursor`, so every event is yielded exactly once, each order's
   * events in the order they happened, with no gap.
   *
   * It survives a server restart: a request that gets no response (connection refused or reset, a
   * request timed out), 502, 503, 504 or 429 is retried from the same cursor, after `Retry-After`
   * when the response gives one, else after a backoff that doubles from 100 ms to at most 5 s — for
   * as long as it takes (`onRetry` sees each failure, and may throw to give up). Any other error
   * ends the loop with a PetstoreApiError: 400 `invalid_cursor` (not a cursor of this feed), 410
   * `events_expired` (events after it have been deleted by retention: the consumer has missed some
   * and rebuilds its view, as docs/order-events.md describes), 401, 403, 500.
   *
   * To resume later, keep a cursor: the `id` of the last event handled is one (any event's `id` is
   * a valid `after`), and so is the iterator's `cursor`, the position after the last event the loop
   * went past (also past an empty poll): the event a loop stopped on, by `break` or by an error, is
   * not counted, so resuming from `cursor` delivers it again. `break`, or aborting `signal`, stops
   * the loop without an error (a poll in flight is cancelled; no further event is yielded).
   */
  events(options?: EventsOptions): OrderEventStream

  // Webhook endpoints (beta; scope `webhooks:manage`, with `orders:read` to create one, replay one
  // or change its url). Ids are bigints or decimal strings.

  /**
   * Creates a webhook endpoint (POST /webhook-endpoints): every event of its types (default: all)
   * committed from now on is POSTed to `url`, in feed order, signed. Resolves with the endpoint and
   * its `secret`, which is never shown again. 400 `invalid_webhook_url` when the URL is not https
   * or reaches a private address; 409 `webhook_endpoint_limit` when the server holds its maximum.
   */
  createWebhookEndpoint(endpoint: CreateWebhookEndpointBody, options?: RequestOptions): Promise<WebhookEndpointCreated>
  /** Every webhook endpoint, ascending id, without secrets (GET /webhook-endpoints). */
  listWebhookEndpoints(options?: RequestOptions): Promise<WebhookEndpoint[]>
  /** One webhook endpoint (GET /webhook-endpoints/{endpointId}); unknown: 404 `webhook_endpoint_not_found`. */
  getWebhookEndpoint(id: bigint | string, options?: RequestOptions): Promise<WebhookEndpoint>
  /**
   * Changes the fields given (PATCH /webhook-endpoints/{endpointId}): `enabled: false` disables it,
   * `enabled: true` resumes it from its position.
   */
  updateWebhookEndpoint(id: bigint | string, patch: UpdateWebhookEndpointBody, options?: RequestOptions): Promise<WebhookEndpoint>
  /** Deletes a webhook endpoint and its attempts (DELETE /webhook-endpoints/{endpointId}). */
  deleteWebhookEndpoint(id: bigint | string, options?: RequestOptions): Promise<void>
  /**
   * Gives the endpoint a new signing secret and resolves with it (POST …/rotate-secret); the
   * previous one also signs for 24 hours.
   */
  rotateWebhookSecret(id: bigint | string, options?: RequestOptions): Promise<string>
  /**
   * Sends the endpoint every event of its types after the feed cursor `after` again, and enables it
   * (POST …/replay). 410 `events_expired` for a cursor behind retention, 400 `invalid_cursor` past the end.
   */
  replayWebhookEndpoint(id: bigint | string, after: string | bigint, options?: RequestOptions): Promise<WebhookEndpoint>
  /** The endpoint's latest delivery attempts, newest first, at most `limit` (1–100, default 20). */
  listWebhookAttempts(id: bigint | string, options?: AttemptsOptions): Promise<WebhookAttempt[]>
  /**
   * Sends the endpoint one signed `webhook.ping` delivery now, outside the feed (POST …/ping), and
   * resolves with how it went: `status` when a response came, `error` when it was not a 2xx, and
   * `durationMs`. The endpoint is left as it was (position, status, attempts).
   */
  pingWebhookEndpoint(id: bigint | string, options?: RequestOptions): Promise<WebhookPingResult>
}

// ---- webhook endpoints (beta) ----

/** A webhook endpoint: a consumer of the event feed with its own `position` (a feed cursor), never with its secret. */
export type WebhookEndpoint = componentsV2['schemas']['WebhookEndpoint']
/** A new webhook endpoint, with its signing `secret` (`whsec_…`), shown only at creation. */
export type WebhookEndpointCreated = componentsV2['schemas']['WebhookEndpointCreated']
/** One delivery attempt: the event's id, when, the response status or a short error, how long. */
export type WebhookAttempt = componentsV2['schemas']['WebhookAttempt']
/** How a test delivery (pingWebhookEndpoint) went: the response status or a short error, how long. */
export type WebhookPingResult = componentsV2['schemas']['WebhookPingResult']
/** The body of a delivery, as the endpoint's URL receives it (verify it with `standardwebhooks`). */
export type WebhookDelivery = componentsV2['schemas']['WebhookDelivery']
/** `url`, and optionally `eventTypes` (default: every type) and `description`. */
export type CreateWebhookEndpointBody = NonNullable<operationsV2['createWebhookEndpoint']['requestBody']>['content']['application/json']
/** Any of `url`, `eventTypes`, `description`, `enabled`. */
export type UpdateWebhookEndpointBody = NonNullable<operationsV2['updateWebhookEndpoint']['requestBody']>['content']['application/json']

export interface AttemptsOptions extends RequestOptions {
  /** How many attempts at most, 1–100 (the server's default is 20). */
  limit?: number
}

type ListOrdersQuery = NonNullable<operationsV2['listOrders']['parameters']['query']>

// ---- the order event feed (experimental) ----

/**
 * One change to an order, recorded in the change's own transaction: `id`, its position in the feed
 * (decimal text; a valid `after`, to resume right after it), `type`, `occurredAt` (RFC 3339, UTC)
 * and `order`, the order as it was right after the change (ids `bigint`, exact).
 */
export type OrderEvent = OrderEventPage['data'][number]
/** `order.created`, `order.updated` (an import), `order.shipped`, `order.completed` or `order.cancelled`. */
export type OrderEventType = OrderEvent['type']
/** A page of the event feed: `nextCursor` is always present, the position to resume from. */
export type OrderEventPage = operationsV2['listOrderEvents']['responses'][200]['content']['application/json']
type ListOrderEventsQuery = NonNullable<operationsV2['listOrderEvents']['parameters']['query']>

export interface EventsOptions extends RequestOptions {
  /**
   * The events after this cursor: a response's `nextCursor`, an event's `id`, or a stream's
   * `cursor`; a bigint position too. Omitted: from the oldest event the server retains.
   */
  after?: string | bigint
  /** How many events one request returns at most, 1–1000 (the server's default is 100). */
  limit?: number
  /** Seconds a request may be held while no event follows the cursor, 0–30 (default 20). */
  wait?: number
  /**
   * Called before each retry, with the failure and the delay before the retry. It may log; it may
   * throw to give up, and the loop then throws that error.
   */
  onRetry?: (retry: EventsRetry) => void
}

/** A failed request of `events()` that will be retried. */
export interface EventsRetry {
  /** A PetstoreApiError (429, 502, 503, 504), or the error of a request that got no response. */
  error: unknown
  /** 1 for the first retry since the last response that succeeded. */
  attempt: number
  /** How long until the retry: `Retry-After` when the response had one, else the backoff. */
  delayMs: number
  /** The cursor the retry resumes from (undefined: from the oldest retained event). */
  cursor: string | undefined
}

/** The async iterator `events()` returns, with the cursor to resume from. */
export interface OrderEventStream extends AsyncIterableIterator<OrderEvent> {
  /**
   * Where to resume: the position after the last event yielded (its `id`), or after the last empty
   * poll; before the first response, the `after` given (undefined when none was).
   */
  readonly cursor: string | undefined
}

/** Default `wait`: well under the idle timeouts of usual proxies and load balancers (60 s). */
const DEFAULT_EVENTS_WAIT_SECONDS = 20
/** A poll with no answer this long after its `wait` has ended is given up and retried (a dead connection). */
const POLL_GRACE_MS = 15_000
/** An empty page that came back sooner than this is not followed at once (`wait: 0`, a server stopping). */
const EMPTY_POLL_INTERVAL_MS = 1000
const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 5000
/** Statuses that say "not now": the request is retried from the same cursor. */
const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504])
const EVENT_TYPES: readonly string[] = ['order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled'] satisfies OrderEventType[]

/** `events()`: long polls, each resuming from the previous response's `nextCursor`, retried while the server is away. */
function followEvents(call: Call, options: EventsOptions): OrderEventStream {
  const { limit, wait = DEFAULT_EVENTS_WAIT_SECONDS, signal, onRetry } = options
  if (typeof wait !== 'number' || !Number.isFinite(wait) || wait < 0) throw new TypeError('events: wait must be a number of seconds, 0–30')
  let cursor = options.after === undefined ? undefined : int64Text(options.after, 'events: after')

  async function poll(after: string | undefined): Promise<OrderEventPage> {
    const params: { [K in keyof ListOrderEventsQuery]: string } = { wait: String(wait) }
    if (after !== undefined) params.after = after
    if (limit !== undefined) params.limit = String(limit)
    const query = new URLSearchParams(params as Record<string, string>)
    // One signal for the request and its body: the caller's abort, or no answer in time.
    const controller = new AbortController()
    const onAbort = (): void => controller.abort(signal?.reason)
    signal?.addEventListener('abort', onAbort, { once: true })
    const timer = setTimeout(() => controller.abort(new PollTimeoutError(wait * 1000 + POLL_GRACE_MS)), wait * 1000 + POLL_GRACE_MS)
    try {
      const response = await call('GET', `store/order-events?${query.toString()}`, controller.signal)
      return decodeEventsPage(await readJson(response), response)
    } finally {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
  }

  const aborted = (): boolean => signal?.aborted === true

  async function* follow(): AsyncGenerator<OrderEvent, undefined, undefined> {
    let failures = 0
    while (!aborted()) {
      const started = Date.now()
      let page: OrderEventPage
      try {
        page = await poll(cursor)
      } catch (error) {
        if (aborted()) return undefined
        if (!isTransient(error)) throw error
        failures++
        const delayMs = retryDelay(error, failures)
        onRetry?.({ error, attempt: failures, delayMs, cursor })
        if (!(await pause(delayMs, signal))) return undefined
        continue
      }
      failures = 0
      for (const event of page.data) {
        if (aborted()) return undefined
        yield event
        // Only once the loop asks for the next event: the one it stopped on (break, throw) is not
        // counted as handled, so resuming from `cursor` delivers it again rather than skip it.
        cursor = event.id
      }
      cursor = page.nextCursor
      if (page.data.length === 0 && !(await pause(EMPTY_POLL_INTERVAL_MS - (Date.now() - started), signal))) return undefined
    }
    return undefined
  }

  const generator = follow()
  return {
    get cursor() {
      return cursor
    },
    next: () => generator.next(),
    return: (value?: unknown) => generator.return(value as undefined),
    throw: (error?: unknown) => generator.throw(error),
    [Symbol.asyncIterator]() {
      return this
    },
  }
}

/** A poll that got no answer in time: retried like a connection refused. */
class PollTimeoutError extends Error {
  constructor(ms: number) {
    super(`no answer from the server within ${ms} ms`)
    this.name = 'PollTimeoutError'
  }
}

/** Whether a failed poll is retried: no response at all, or a status that means "not now". */
function isTransient(error: unknown): boolean {
  if (error instanceof PetstoreApiError) return RETRIED_STATUSES.has(error.status)
  // fetch's network errors are TypeErrors with the cause (refused, reset, closed); a TypeError
  // without one is a request that could never be sent (e.g. a key with a newline): not retried.
  if (error instanceof TypeError) return error.cause !== undefined
  return true
}

/** `Retry-After` when the response had one, else a backoff doubling from RETRY_FIRST_MS to RETRY_MAX_MS, jittered. */
function retryDelay(error: unknown, attempt: number): number {
  if (error instanceof PetstoreApiError && error.retryAfter !== undefined) return Math.max(error.retryAfter * 1000, RETRY_FIRST_MS)
  const backoff = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(attempt - 1, 16))
  return Math.round(backoff / 2 + (Math.random() * backoff) / 2) // many clients of a restarted server do not return in step
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted === true) return Promise.resolve(false)
  if (ms <= 0) return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = (completed: boolean): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      resolve(completed)
    }
    const onAbort = (): void => done(false)
    const timer = setTimeout(done, ms, true)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

function decodeEventsPage(body: unknown, response: Response): OrderEventPage {
  if (!isRecord(body) || !Array.isArray(body.data)) throw unexpected(response, 'expected a page of order events')
  if (typeof body.nextCursor !== 'string' || body.nextCursor === '') throw unexpected(response, 'nextCursor is missing')
  const data = body.data.map((item, index) => {
    try {
      return decodeOrderEvent(item)
    } catch (error) {
      throw unexpected(response, `event ${index}: ${(error as Error).message}`)
    }
  })
  return { data, nextCursor: body.nextCursor }
}

function decodeOrderEvent(value: unknown): OrderEvent {
  if (!isRecord(value)) throw new Error('not an object')
  if (typeof value.id !== 'string' || value.id === '') throw new Error('id is not a string')
  if (typeof value.type !== 'string' || !EVENT_TYPES.includes(value.type)) throw new Error('type is not a known event type')
  if (typeof value.occurredAt !== 'string') throw new Error('occurredAt is not a string')
  let order: OrderV2
  try {
    order = decodeOrderV2(value.order)
  } catch (error) {
    throw new Error(`order: ${(error as Error).message}`)
  }
  return { id: value.id, type: value.type as OrderEventType, occurredAt: value.occurredAt, order }
}

/**
 * A client of v2, given a server URL ending in `/v2` (e.g. `https://api.petstore.example/v2`).
 * A separate client rather than one deriving `/v2` from `/v1`: each version's document names its
 * own servers, and nothing promises that a deployment routes both versions under one prefix.
 */
export function createV2Client(options: ClientOptions): PetstoreV2Client {
  const call = caller(options, 'v2')

  async function listOrdersPage({ signal, ...query }: PageOptions = {}): Promise<OrderPage> {
    const response = await call('GET', `store/orders${queryString(query)}`, signal)
    return decodePage(await readJson(response), response)
  }

  return {
    listOrdersPage,

    async *orders({ pageSize, signal, ...filters } = {}) {
      let cursor: string | undefined
      do {
        const page = await listOrdersPage({ ...filters, limit: pageSize, cursor, signal })
        yield* page.data
        cursor = page.nextCursor
      } while (cursor !== undefined)
    },

    async getOrder(id, { signal } = {}) {
      const response = await call('GET', `store/orders/${orderIdPath(id, 'getOrder')}`, signal)
      return decodeOne(await readJson(response), response)
    },

    async cancelOrder(id, { reason, signal } = {}) {
      const path = `store/orders/${orderIdPath(id, 'cancelOrder')}/cancel`
      const response = await call('POST', path, signal, reason === undefined ? undefined : { reason })
      return orderOrNone(response)
    },

    placeOrder(order, placeOptions = {}) {
      return placeWithRetries(call, order, placeOptions)
    },

    async shipOrder(id, { signal } = {}) {
      const response = await call('POST', `store/orders/${orderIdPath(id, 'shipOrder')}/ship`, signal)
      return orderOrNone(response)
    },

    async completeOrder(id, { signal } = {}) {
      const response = await call('POST', `store/orders/${orderIdPath(id, 'completeOrder')}/complete`, signal)
      return orderOrNone(response)
    },

    events(eventsOptions = {}) {
      return followEvents(call, eventsOptions)
    },

    async createWebhookEndpoint(endpoint, { signal } = {}) {
      const response = await call('POST', 'webhook-endpoints', signal, endpoint)
      return decodeWith(decodeCreatedEndpoint, await readJson(response), response, 'webhook endpoint')
    },

    async listWebhookEndpoints({ signal } = {}) {
      const response = await call('GET', 'webhook-endpoints', signal)
      return decodeList(decodeWebhookEndpoint, await readJson(response), response, 'webhook endpoint')
    },

    async getWebhookEndpoint(id, { signal } = {}) {
      const response = await call('GET', `webhook-endpoints/${endpointIdPath(id, 'getWebhookEndpoint')}`, signal)
      return decodeWith(decodeWebhookEndpoint, await readJson(response), response, 'webhook endpoint')
    },

    async updateWebhookEndpoint(id, patch, { signal } = {}) {
      const response = await call('PATCH', `webhook-endpoints/${endpointIdPath(id, 'updateWebhookEndpoint')}`, signal, patch)
      return decodeWith(decodeWebhookEndpoint, await readJson(response), response, 'webhook endpoint')
    },

    async deleteWebhookEndpoint(id, { signal } = {}) {
      const response = await call('DELETE', `webhook-endpoints/${endpointIdPath(id, 'deleteWebhookEndpoint')}`, signal)
      await response.body?.cancel()
    },

    async rotateWebhookSecret(id, { signal } = {}) {
      const response = await call('POST', `webhook-endpoints/${endpointIdPath(id, 'rotateWebhookSecret')}/rotate-secret`, signal)
      const body = await readJson(response)
      if (!isRecord(body) || typeof body.secret !== 'string') throw unexpected(response, 'expected {"secret"}')
      return body.secret
    },

    async replayWebhookEndpoint(id, after, { signal } = {}) {
      const path = `webhook-endpoints/${endpointIdPath(id, 'replayWebhookEndpoint')}/replay`
      const response = await call('POST', path, signal, { after: int64Text(after, 'replayWebhookEndpoint: after') })
      return decodeWith(decodeWebhookEndpoint, await readJson(response), response, 'webhook endpoint')
    },

    async listWebhookAttempts(id, { limit, signal } = {}) {
      const query = limit === undefined ? '' : `?limit=${encodeURIComponent(String(limit))}`
      const response = await call('GET', `webhook-endpoints/${endpointIdPath(id, 'listWebhookAttempts')}/attempts${query}`, signal)
      return decodeList(decodeWebhookAttempt, await readJson(response), response, 'attempt')
    },

    async pingWebhookEndpoint(id, { signal } = {}) {
      const response = await call('POST', `webhook-endpoints/${endpointIdPath(id, 'pingWebhookEndpoint')}/ping`, signal)
      return decodeWith(decodePingResult, await readJson(response), response, 'ping result')
    },
  }
}

/** The order of a write's 200, or undefined for its 204 (a key without `orders:read` is not shown it). */
async function orderOrNone(response: Response): Promise<OrderV2 | undefined> {
  if (response.status === 204) {
    await response.body?.cancel()
    return undefined
  }
  return decodeOne(await readJson(response), response)
}

function endpointIdPath(id: unknown, operation: string): string {
  return encodeURIComponent(int64Text(id, `${operation}: the id`))
}

/** A value decoded by `decode`, or an `unexpected_response` naming what was wrong. */
function decodeWith<T>(decode: (value: unknown) => T, body: unknown, response: Response, what: string): T {
  try {
    return decode(body)
  } catch (error) {
    throw unexpected(response, `${what}: ${(error as Error).message}`)
  }
}

/** `{"data": [...]}`, each item decoded by `decode`. */
function decodeList<T>(decode: (value: unknown) => T, body: unknown, response: Response, what: string): T[] {
  if (!isRecord(body) || !Array.isArray(body.data)) throw unexpected(response, `expected {"data": [${what}s]}`)
  return body.data.map((item, index) => decodeWith(decode, item, response, `${what} ${index}`))
}

function text(record: Record<string, unknown>, field: string): string {
  const value = record[field]
  if (typeof value !== 'string') throw new Error(`${field} is not a string`)
  return value
}

function optionalText(record: Record<string, unknown>, field: string): string | undefined {
  return record[field] === undefined ? undefined : text(record, field)
}

const ENDPOINT_STATUSES: readonly string[] = ['enabled', 'disabled'] satisfies WebhookEndpoint['status'][]

function decodeWebhookEndpoint(value: unknown): WebhookEndpoint {
  if (!isRecord(value)) throw new Error('not an object')
  const eventTypes = value.eventTypes
  if (!Array.isArray(eventTypes) || !eventTypes.every((type) => typeof type === 'string' && EVENT_TYPES.includes(type))) {
    throw new Error('eventTypes is not a list of event types')
  }
  const status = text(value, 'status')
  if (!ENDPOINT_STATUSES.includes(status)) throw new Error('status is not a known status')
  const endpoint: WebhookEndpoint = {
    id: int64(value.id, 'id'),
    url: text(value, 'url'),
    eventTypes: eventTypes as OrderEventType[],
    status: status as WebhookEndpoint['status'],
    position: text(value, 'position'),
    createdAt: text(value, 'createdAt'),
  }
  const description = optionalText(value, 'description')
  if (description !== undefined) endpoint.description = description
  const disabledReason = optionalText(value, 'disabledReason')
  if (disabledReason !== undefined) endpoint.disabledReason = disabledReason as WebhookEndpoint['disabledReason']
  const failingSince = optionalText(value, 'failingSince')
  if (failingSince !== undefined) endpoint.failingSince = failingSince
  const nextAttemptAt = optionalText(value, 'nextAttemptAt')
  if (nextAttemptAt !== undefined) endpoint.nextAttemptAt = nextAttemptAt
  return endpoint
}

function decodeCreatedEndpoint(value: unknown): WebhookEndpointCreated {
  const endpoint = decodeWebhookEndpoint(value)
  return { ...endpoint, secret: text(value as Record<string, unknown>, 'secret') }
}

function decodeWebhookAttempt(value: unknown): WebhookAttempt {
  if (!isRecord(value)) throw new Error('not an object')
  const attempt: WebhookAttempt = {
    eventId: text(value, 'eventId'),
    attemptedAt: text(value, 'attemptedAt'),
    durationMs: int32(value.durationMs, 'durationMs'),
  }
  if (value.status !== undefined) attempt.status = int32(value.status, 'status')
  const error = optionalText(value, 'error')
  if (error !== undefined) attempt.error = error
  return attempt
}

function decodePingResult(value: unknown): WebhookPingResult {
  if (!isRecord(value)) throw new Error('not an object')
  const result: WebhookPingResult = { durationMs: int32(value.durationMs, 'durationMs') }
  if (value.status !== undefined) result.status = int32(value.status, 'status')
  const error = optionalText(value, 'error')
  if (error !== undefined) result.error = error
  return result
}

// ---- placing an order ----

/** The body as the v2 document describes it: a change there that the client does not follow fails to compile. */
type PlaceOrderRequest = NonNullable<operationsV2['placeOrder']['requestBody']>['content']['application/json']

const DEFAULT_PLACE_ATTEMPTS = 5
const MAX_PLACE_ATTEMPTS = 10
/** Visible ASCII, as the Idempotency-Key draft (and the server) require. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/
const DECIMAL = /^-?[0-9]+$/

/** `placeOrder`: one key for every attempt, so that however many reach the server, one order is placed. */
async function placeWithRetries(call: Call, order: PlaceOrderBody, options: PlaceOptions): Promise<OrderV2> {
  const { signal, onRetry, maxAttempts = DEFAULT_PLACE_ATTEMPTS } = options
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > MAX_PLACE_ATTEMPTS) {
    throw new TypeError(`placeOrder: maxAttempts must be an integer, 1–${MAX_PLACE_ATTEMPTS}`)
  }
  // Time-ordered (RFC 9562): the server's index of keys grows at its end, where a random UUID would
  // make every place write a page of it somewhere in the middle.
  const idempotencyKey = options.idempotencyKey ?? uuidv7()
  if (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey)) {
    throw new TypeError('placeOrder: idempotencyKey must be 1–255 visible ASCII characters')
  }
  const body = placeBody(order)
  const headers = { 'idempotency-key': idempotencyKey }
  for (let attempt = 1; ; attempt++) {
    try {
      const response = await call('POST', 'store/orders', signal, body, headers)
      let text: string
      try {
        text = await response.text()
      } catch (error) {
        throw new ResponseCutOffError(error) // the order may well be placed: the retry's replay says so
      }
      return decodeOne(parseJson(text, response), response)
    } catch (error) {
      // A body cut off is thrown as fetch threw it, as documented for a request with no response.
      const thrown = error instanceof ResponseCutOffError ? error.cause : error
      if (signal?.aborted === true || attempt >= maxAttempts || !isRetriedPlaceFailure(error)) throw thrown
      const delayMs = retryDelay(error, attempt)
      onRetry?.({ error: thrown, attempt, delayMs, idempotencyKey })
      if (!(await pause(delayMs, signal))) throw signal?.reason ?? thrown
    }
  }
}

/** The request body: `petId` an exact JSON integer, `shipDate` as given (a Date in RFC 3339). */
function placeBody(order: PlaceOrderBody): PlaceOrderRequest {
  if (typeof order !== 'object' || order === null) throw new TypeError('placeOrder: the order must be an object')
  const petId = int64Text(order.petId, 'placeOrder: petId')
  if (!DECIMAL.test(petId)) throw new TypeError('placeOrder: petId must be a bigint or a decimal string')
  const body: PlaceOrderRequest = { petId: BigInt(petId), quantity: order.quantity }
  if (order.shipDate !== undefined) body.shipDate = instant(order.shipDate)
  return body
}

/** A response whose headers arrived but whose body did not: as good as no response. */
class ResponseCutOffError extends Error {
  constructor(cause: unknown) {
    super('the response was cut off before its end', { cause })
    this.name = 'ResponseCutOffError'
  }
}

/** Retried with the same key: no (whole) response, a 5xx, or the first request with the key still in flight. */
function isRetriedPlaceFailure(error: unknown): boolean {
  if (error instanceof PetstoreApiError) return error.status >= 500 || (error.status === 409 && error.code === 'idempotency_key_in_use')
  if (error instanceof ResponseCutOffError) return true
  // fetch's network errors are TypeErrors with the cause (refused, reset, closed); one without a
  // cause could never be sent (e.g. an API key with a newline), and an abort is not a TypeError.
  return error instanceof TypeError && error.cause !== undefined
}

/** `?limit=…&status=…`, from the options given; their values checked only where a mistake would be silent. */
function queryString(options: Omit<PageOptions, 'signal'>): string {
  const query: { [K in keyof ListOrdersQuery]: string } = {}
  if (options.limit !== undefined) query.limit = String(options.limit)
  if (options.cursor !== undefined) query.cursor = options.cursor
  if (options.status !== undefined) {
    if (!Array.isArray(options.status)) throw new TypeError('status: an array of statuses, e.g. [\'pending\']')
    query.status = options.status.join(',')
  }
  if (options.petId !== undefined) query.petId = int64Text(options.petId, 'petId')
  if (options.complete !== undefined) query.complete = String(options.complete)
  if (options.shipDateFrom !== undefined) query.shipDateFrom = instant(options.shipDateFrom)
  if (options.shipDateTo !== undefined) query.shipDateTo = instant(options.shipDateTo)
  const text = new URLSearchParams(query as Record<string, string>).toString()
  return text === '' ? '' : `?${text}`
}

function instant(value: Date | string): string {
  return value instanceof Date ? value.toISOString() : value
}

/** A bigint or a decimal string, as text; a JS number is exact only up to 2^53, so it is refused. */
function int64Text(value: unknown, what: string): string {
  if (typeof value !== 'bigint' && typeof value !== 'string') throw new TypeError(`${what}: must be a bigint or a decimal string`)
  return value.toString()
}

function orderIdPath(id: unknown, operation: string): string {
  return encodeURIComponent(int64Text(id, `${operation}: the id`))
}

function decodePage(body: unknown, response: Response): OrderPage {
  if (!isRecord(body) || !Array.isArray(body.data)) throw unexpected(response, 'expected a page of orders')
  const data = body.data.map((item, index) => {
    try {
      return decodeOrderV2(item)
    } catch (error) {
      throw unexpected(response, `order ${index}: ${(error as Error).message}`)
    }
  })
  if (body.nextCursor === undefined) return { data }
  if (typeof body.nextCursor !== 'string') throw unexpected(response, 'nextCursor is not a string')
  return { data, nextCursor: body.nextCursor }
}

function decodeOne(body: unknown, response: Response): OrderV2 {
  try {
    return decodeOrderV2(body)
  } catch (error) {
    throw unexpected(response, `order: ${(error as Error).message}`)
  }
}

const STATUSES: readonly string[] = ['pending', 'shipped', 'cancelled'] satisfies OrderStatus[]

/** A v2 Order from its lossless JSON: the v1 fields decoded as v1 does, and the status fields. */
function decodeOrderV2(value: unknown): OrderV2 {
  const v1 = decodeOrder(value)
  const record = value as Record<string, unknown>
  if (v1.id === undefined) throw new Error('id is missing')
  if (typeof record.complete !== 'boolean') throw new Error('complete is not a boolean')
  if (typeof record.status !== 'string' || !STATUSES.includes(record.status)) throw new Error('status is not a known status')
  const order: OrderV2 = { ...v1, id: v1.id, complete: record.complete, status: record.status as OrderStatus }
  if (record.shippedAt !== undefined) {
    if (typeof record.shippedAt !== 'string') throw new Error('shippedAt is not a string')
    order.shippedAt = record.shippedAt
  }
  if (record.completedAt !== undefined) {
    if (typeof record.completedAt !== 'string') throw new Error('completedAt is not a string')
    order.completedAt = record.completedAt
  }
  if (record.cancelledAt !== undefined) {
    if (typeof record.cancelledAt !== 'string') throw new Error('cancelledAt is not a string')
    order.cancelledAt = record.cancelledAt
  }
  if (record.cancellationReason !== undefined) {
    if (typeof record.cancellationReason !== 'string') throw new Error('cancellationReason is not a string')
    order.cancellationReason = record.cancellationReason as CancellationReason
  }
  return order
}

/** The server URL as a base for relative paths: it must end in /v1 or /v2 (a trailing slash is added). */
function serverUrl(baseUrl: string | URL, version: 'v1' | 'v2'): URL {
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    throw new TypeError(`baseUrl: not a URL: ${String(baseUrl)}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('baseUrl: must be an http(s) URL')
  if (!new RegExp(`/${version}/?$`).test(url.pathname)) {
    throw new TypeError(`baseUrl: must be a server of the API, ending in /${version} (got ${url.href})`)
  }
  url.pathname = url.pathname.replace(/\/?$/, '/')
  url.search = ''
  url.hash = ''
  return url
}

async function readJson(response: Response): Promise<unknown> {
  return parseJson(await response.text(), response)
}

function parseJson(text: string, response: Response): unknown {
  if (!/^application\/json\b/i.test(response.headers.get('content-type') ?? '')) {
    throw unexpected(response, 'the response is not JSON')
  }
  try {
    return parse(text) // numbers stay LosslessNumber: exact, whatever their size
  } catch {
    throw unexpected(response, 'the response is not valid JSON')
  }
}

async function errorOf(response: Response): Promise<PetstoreApiError> {
  let body: unknown
  try {
    body = await readJson(response)
  } catch {
    body = undefined
  }
  if (isRecord(body) && typeof body.code === 'string' && typeof body.message === 'string') {
    return new PetstoreApiError(response.status, body.code, body.message, response.headers)
  }
  return unexpected(response, `HTTP ${response.status} ${response.statusText}`.trim())
}

function unexpected(response: Response, message: string): PetstoreApiError {
  return new PetstoreApiError(response.status, 'unexpected_response', message, response.headers)
}

function decodeOrders(body: unknown, response: Response): Order[] {
  if (!Array.isArray(body)) throw unexpected(response, 'expected a JSON array of orders')
  return body.map((item, index) => {
    try {
      return decodeOrder(item)
    } catch (error) {
      throw unexpected(response, `order ${index}: ${(error as Error).message}`)
    }
  })
}

/** An Order from its lossless JSON: int64 as bigint, the rest as JSON has it. Unknown fields are ignored. */
function decodeOrder(value: unknown): Order {
  if (!isRecord(value)) throw new Error('not an object')
  const order: Order = {}
  if (value.id !== undefined) order.id = int64(value.id, 'id')
  if (value.petId !== undefined) order.petId = int64(value.petId, 'petId')
  if (value.quantity !== undefined) order.quantity = int32(value.quantity, 'quantity')
  if (value.shipDate !== undefined) {
    if (typeof value.shipDate !== 'string') throw new Error('shipDate is not a string')
    order.shipDate = value.shipDate
  }
  if (value.complete !== undefined) {
    if (typeof value.complete !== 'boolean') throw new Error('complete is not a boolean')
    order.complete = value.complete
  }
  return order
}

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

function int64(value: unknown, field: string): bigint {
  if (!isLosslessNumber(value) || !isInteger(value.value)) throw new Error(`${field} is not an integer`)
  const result = BigInt(value.value)
  if (result < INT64_MIN || result > INT64_MAX) throw new Error(`${field} is out of the int64 range`)
  return result
}

function int32(value: unknown, field: string): number {
  if (!isLosslessNumber(value) || !isInteger(value.value)) throw new Error(`${field} is not an integer`)
  const result = Number(value.value)
  if (!Number.isSafeInteger(result) || result < -(2 ** 31) || result >= 2 ** 31) {
    throw new Error(`${field} is out of the int32 range`)
  }
  return result
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !isLosslessNumber(value)
}
