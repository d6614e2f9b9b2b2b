// v2 (beta): `createV2Client`, for a server URL ending in `/v2`.
import type {
  CancellationReason,
  CreateWebhookEndpointBody,
  OrderPage,
  OrderV2,
  UpdateWebhookEndpointBody,
  WebhookAttempt,
  WebhookEndpoint,
  WebhookEndpointCreated,
  WebhookPingResult,
} from './api-types.js'
import {
  decodeCreatedEndpoint,
  decodeList,
  decodeOne,
  decodePage,
  decodePingResult,
  decodeWebhookAttempt,
  decodeWebhookEndpoint,
  decodeWith,
  isRecord,
} from './decode.js'
import { unexpected } from './errors.js'
import { followEvents, type EventsOptions, type OrderEventStream } from './follow-events.js'
import { queryString, type OrderFilters, type PageOptions } from './list-query.js'
import { placeWithRetries, type PlaceOptions, type PlaceOrderBody } from './place-order.js'
import { idPath, ifMatchHeaders, int64Text } from './request-values.js'
import { caller, readJson, type ClientOptions, type RequestOptions } from './transport.js'
import { etagOf, patchBody, type OrderPatch, type UpdatedOrder } from './update-order.js'

export interface IterateOptions extends OrderFilters, RequestOptions {
  /** How many orders each request fetches, 1–1000 (the server's default is 100). */
  pageSize?: number
}

/** The options of a write to one order: updateOrder, shipOrder, completeOrder, cancelOrder. */
export interface WriteOptions extends RequestOptions {
  /**
   * Write only if the order is still at this version (`If-Match`): the `etag` updateOrder resolved
   * with (`'"3"'`), or an order's `version` (3). Another version rejects with 412
   * `precondition_failed`, whose message names the current one, and nothing changes. `'*'`, or
   * none: whatever the order's version.
   */
  ifMatch?: string | number
}

export interface CancelOptions extends WriteOptions {
  /** Why the order is cancelled; recorded with the first cancellation only. */
  reason?: CancellationReason
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
  /**
   * One order, cancelled ones included (GET /store/orders/{orderId}); unknown: 404 `order_not_found`.
   * Its `version` is what its ETag names: give it as `ifMatch` to a write.
   */
  getOrder(id: bigint | string, options?: RequestOptions): Promise<OrderV2>
  /**
   * Cancels an order (POST /store/orders/{orderId}/cancel) and resolves with it once the
   * cancellation is durable. Safe to retry: an order already cancelled resolves with the order as it
   * stands (the first cancellation's time and reason). A shipped order rejects with 409
   * `order_already_shipped`, an unknown one with 404 `order_not_found`. A key without
   * `orders:read` is not shown the order: the cancel is done all the same, and it resolves with
   * `undefined` (the server's 204). With `ifMatch`, cancels only an order still at that version (else
   * 412 `precondition_failed`).
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
   * Changes an order (PATCH /store/orders/{orderId}, a JSON Merge Patch, scope `orders:write`) and
   * resolves once the change is durable with the order and its `etag`. Only the members given
   * change: `petId`, `quantity` and `shipDate` (null removes it) while the order is pending (else 409
   * `order_not_pending`), `metadata` in any state, key by key (a key set to null is removed). A patch
   * that changes nothing resolves with the order as it is, its version kept.
   *
   * Give `ifMatch` (the `etag` of an earlier call, or the `version` of an order read) so that a
   * change someone else made meanwhile is not overwritten: 412 `precondition_failed` then, naming
   * the current version, and nothing changes. Without it, the patch applies to the order as it
   * stands. A bad value is 400 `invalid_body` naming it; unknown: 404 `order_not_found`. Not retried:
   * a failed call can be sent again with the same `ifMatch`, which fails once the first one landed.
   */
  updateOrder(id: bigint | string, patch: OrderPatch, options?: WriteOptions): Promise<UpdatedOrder>
  /**
   * Ships a pending order (POST /store/orders/{orderId}/ship, scope `orders:write`) and resolves
   * with it once durable, `shippedAt` set. Safe to retry: an order already shipped resolves as it
   * stands. Cancelled: 409 `order_cancelled`; unknown: 404 `order_not_found`. A key without
   * `orders:read` is not shown the order: the ship is done all the same, and it resolves with
   * `undefined` (the server's 204). With `ifMatch`, ships only an order still at that version.
   */
  shipOrder(id: bigint | string, options?: WriteOptions): Promise<OrderV2 | undefined>
  /**
   * Completes a shipped order (POST /store/orders/{orderId}/complete, scope `orders:write`):
   * `complete` true, `completedAt` set, once durable. Safe to retry: an order already complete
   * resolves as it stands. Pending: 409 `order_not_shipped`; cancelled: 409 `order_cancelled`;
   * unknown: 404 `order_not_found`. A key without `orders:read`: `undefined` (the server's 204).
   * With `ifMatch`, completes only an order still at that version.
   */
  completeOrder(id: bigint | string, options?: WriteOptions): Promise<OrderV2 | undefined>
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
   * `durationMs`. The endpoint is left as it was (position, status, attempts). One ping per endpoint is
   * in flight at a time: 409 `ping_in_flight` while another (from any client or instance) is.
   */
  pingWebhookEndpoint(id: bigint | string, options?: RequestOptions): Promise<WebhookPingResult>
}

export interface AttemptsOptions extends RequestOptions {
  /** How many attempts at most, 1–100 (the server's default is 20). */
  limit?: number
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
      const response = await call('GET', `store/orders/${idPath(id, 'getOrder')}`, signal)
      return decodeOne(await readJson(response), response)
    },

    async cancelOrder(id, { reason, ifMatch, signal } = {}) {
      const path = `store/orders/${idPath(id, 'cancelOrder')}/cancel`
      const headers = ifMatchHeaders(ifMatch, 'cancelOrder')
      const response = await call('POST', path, signal, reason === undefined ? undefined : { reason }, headers)
      return orderOrNone(response)
    },

    placeOrder(order, placeOptions = {}) {
      return placeWithRetries(call, order, placeOptions)
    },

    async updateOrder(id, patch, { ifMatch, signal } = {}) {
      const path = `store/orders/${idPath(id, 'updateOrder')}`
      const headers = { 'content-type': 'application/merge-patch+json', ...ifMatchHeaders(ifMatch, 'updateOrder') }
      const response = await call('PATCH', path, signal, patchBody(patch), headers)
      const etag = etagOf(response)
      return { order: await orderOrNone(response), etag }
    },

    async shipOrder(id, { ifMatch, signal } = {}) {
      const headers = ifMatchHeaders(ifMatch, 'shipOrder')
      const response = await call('POST', `store/orders/${idPath(id, 'shipOrder')}/ship`, signal, undefined, headers)
      return orderOrNone(response)
    },

    async completeOrder(id, { ifMatch, signal } = {}) {
      const headers = ifMatchHeaders(ifMatch, 'completeOrder')
      const response = await call('POST', `store/orders/${idPath(id, 'completeOrder')}/complete`, signal, undefined, headers)
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
      const response = await call('GET', `webhook-endpoints/${idPath(id, 'getWebhookEndpoint')}`, signal)
      return decodeWith(decodeWebhookEndpoint, await readJson(response), response, 'webhook endpoint')
    },

    async updateWebhookEndpoint(id, patch, { signal } = {}) {
      const response = await call('PATCH', `webhook-endpoints/${idPath(id, 'updateWebhookEndpoint')}`, signal, patch)
      return decodeWith(decodeWebhookEndpoint, await readJson(response), response, 'webhook endpoint')
    },

    async deleteWebhookEndpoint(id, { signal } = {}) {
      const response = await call('DELETE', `webhook-endpoints/${idPath(id, 'deleteWebhookEndpoint')}`, signal)
      await response.body?.cancel()
    },

    async rotateWebhookSecret(id, { signal } = {}) {
      const response = await call('POST', `webhook-endpoints/${idPath(id, 'rotateWebhookSecret')}/rotate-secret`, signal)
      const body = await readJson(response)
      if (!isRecord(body) || typeof body.secret !== 'string') throw unexpected(response, 'expected {"secret"}')
      return body.secret
    },

    async replayWebhookEndpoint(id, after, { signal } = {}) {
      const path = `webhook-endpoints/${idPath(id, 'replayWebhookEndpoint')}/replay`
      const response = await call('POST', path, signal, { after: int64Text(after, 'replayWebhookEndpoint: after') })
      return decodeWith(decodeWebhookEndpoint, await readJson(response), response, 'webhook endpoint')
    },

    async listWebhookAttempts(id, { limit, signal } = {}) {
      const query = limit === undefined ? '' : `?limit=${encodeURIComponent(String(limit))}`
      const response = await call('GET', `webhook-endpoints/${idPath(id, 'listWebhookAttempts')}/attempts${query}`, signal)
      return decodeList(decodeWebhookAttempt, await readJson(response), response, 'attempt')
    },

    async pingWebhookEndpoint(id, { signal } = {}) {
      const response = await call('POST', `webhook-endpoints/${idPath(id, 'pingWebhookEndpoint')}/ping`, signal)
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
