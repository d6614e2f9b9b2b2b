// The API's shapes, from the OpenAPI documents the service serves (./openapi-types.ts and
// ./openapi-v2-types.ts, generated): a change there that the client does not follow fails to compile.
import type { components } from './openapi-types.js'
import type { components as componentsV2, operations as operationsV2 } from './openapi-v2-types.js'

/** An order, as listOrders returns it. A field whose value is not known is absent. */
export type Order = components['schemas']['Order']
/** The body of every error response. */
export type ErrorBody = components['schemas']['Error']
/** The codes of the API's errors (README "Error codes"). */
export type ErrorCode = ErrorBody['code']

/**
 * An order as v2 shows it: the v1 fields, its `status`, on a cancelled order when and why, its
 * `version` (1 when placed, one more with every change; its ETag is this number in quotes) and, when
 * it has any key, its `metadata`.
 */
export type OrderV2 = componentsV2['schemas']['Order']
/** The store's own keys and values on an order (string to string), never interpreted by the service. */
export type OrderMetadata = NonNullable<OrderV2['metadata']>
export type OrderStatus = OrderV2['status']
export type CancellationReason = NonNullable<OrderV2['cancellationReason']>
/**
 * The codes of v2's errors: v1's but those of its pets (`invalid_pet_id`, `pet_not_found`, `gone`),
 * and v2's own: pages (`invalid_parameter`, `invalid_cursor`), writes, the event feed (`events_expired`), webhooks.
 */
export type ErrorCodeV2 = componentsV2['schemas']['Error']['code']
/** A page of the v2 list: `nextCursor` is present exactly when more matching orders follow. */
export type OrderPage = operationsV2['listOrders']['responses'][200]['content']['application/json']

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

/**
 * One change to an order, recorded in the change's own transaction: `id`, its position in the feed
 * (decimal text; a valid `after`, to resume right after it), `type`, `occurredAt` (RFC 3339, UTC)
 * and `order`, the order as it was right after the change (ids `bigint`, exact).
 */
export type OrderEvent = OrderEventPage['data'][number]
/** `order.created`, `order.updated` (updateOrder, or an import), `order.shipped`, `order.completed` or `order.cancelled`. */
export type OrderEventType = OrderEvent['type']
/** A page of the event feed: `nextCursor` is always present, the position to resume from. */
export type OrderEventPage = operationsV2['listOrderEvents']['responses'][200]['content']['application/json']
