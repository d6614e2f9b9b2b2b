/**
 * The TypeScript client of the Petstore Orders API: `import { createClient, createV2Client } from
 * '@petstore-orders/client'`. `createClient` speaks v1 to a server URL ending in `/v1`;
 * `createV2Client` speaks v2 (beta) to one ending in `/v2`.
 *
 * Its types come from the OpenAPI documents the service serves (./openapi-types.ts and
 * ./openapi-v2-types.ts, generated). int64
 * ids are `bigint`, exact to the last digit: responses are parsed with lossless-json, never through a
 * JS `number` (exact only up to 2^53). It needs nothing but `fetch` (Node.js 22+, or any runtime
 * that has it).
 *
 * Its modules, by job: transport.ts sends a request and turns an error status into a
 * PetstoreApiError (errors.ts); decode.ts checks every response body; retries.ts says what is
 * retried and after how long; follow-events.ts follows the event feed; place-order.ts places an
 * order under one Idempotency-Key; update-order.ts writes a change and reads its ETag; v1.ts and v2.ts are the two clients.
 */
export type {
  CancellationReason,
  CreateWebhookEndpointBody,
  ErrorBody,
  ErrorCode,
  ErrorCodeV2,
  Order,
  OrderEvent,
  OrderEventPage,
  OrderEventType,
  OrderMetadata,
  OrderPage,
  OrderStatus,
  OrderV2,
  UpdateWebhookEndpointBody,
  WebhookAttempt,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEndpointCreated,
  WebhookPingResult,
} from './api-types.js'
export { PetstoreApiError, RequestTimeoutError } from './errors.js'
export type { EventsOptions, EventsRetry, OrderEventStream } from './follow-events.js'
export type { OrderFilters, PageOptions } from './list-query.js'
export type { PlaceOptions, PlaceOrderBody, PlaceRetry } from './place-order.js'
export type { ClientOptions, RequestOptions } from './transport.js'
export { createClient, type PetstoreClient } from './v1.js'
export type { OrderPatch, UpdatedOrder } from './update-order.js'
export { createV2Client, type AttemptsOptions, type CancelOptions, type IterateOptions, type PetstoreV2Client, type WriteOptions } from './v2.js'
