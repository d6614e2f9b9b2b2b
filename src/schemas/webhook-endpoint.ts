import Type from 'typebox'
import { EVENT_POSITION_PATTERN, ORDER_EVENT_TYPES, type OrderEventType } from '../domain/order-events.js'
import { ATTEMPTS_KEPT, WEBHOOK_DISABLED_REASONS } from '../domain/webhooks.js'
import { Int64 } from './primitives.js'

/** The longest URL an endpoint may have, and the longest description (in UTF-16 code units, as JSON counts them). */
export const MAX_WEBHOOK_URL_LENGTH = 2048
export const MAX_WEBHOOK_DESCRIPTION_LENGTH = 256
/** The secret format: `whsec_` and the base64 of 32 random bytes. */
const WEBHOOK_SECRET_PATTERN = '^whsec_[A-Za-z0-9+/]{43}=$'

const EXAMPLE_URL = 'https://example.com/webhooks/petstore'
const EXAMPLE_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw7kZ8zQ0lVqY='

const ENDPOINT_FIELDS = {
  id: Int64({ description: 'The endpoint\'s identifier (int64, never reused)' }),
  url: Type.String({ description: 'Where events are POSTed: https, and not a private, loopback or link-local address' }),
  eventTypes: Type.Array(Type.String({ enum: [...ORDER_EVENT_TYPES] }), {
    description: 'The event types it is sent, in feed-type order; events of other types are skipped',
  }),
  description: Type.Optional(Type.String({ description: 'What the endpoint is for, when one was given' })),
  status: Type.String({
    enum: ['enabled', 'disabled'],
    description: 'Whether events are sent to it. A disabled endpoint keeps its position; enabling it resumes from there',
  }),
  disabledReason: Type.Optional(
    Type.String({
      enum: [...WEBHOOK_DISABLED_REASONS],
      description:
        'Why it is disabled: the receiver answered 410 (`endpoint_gone`), every retry of one event failed (`retries_exhausted`), ' +
        'its position fell behind the feed\'s retention (`events_expired`), or it was disabled through the API (`disabled_by_request`)',
    }),
  ),
  position: Type.String({
    pattern: EVENT_POSITION_PATTERN,
    description: 'The feed cursor through which it has been served: the next event sent is the first of its types after it',
  }),
  failingSince: Type.Optional(Type.String({ format: 'date-time', description: 'Since when its current event has been failing (RFC 3339, UTC)' })),
  nextAttemptAt: Type.Optional(Type.String({ format: 'date-time', description: 'When its current event is tried again (RFC 3339, UTC)' })),
  createdAt: Type.String({ format: 'date-time', description: 'When it was created (RFC 3339, UTC)' }),
}

const ENDPOINT_EXAMPLE = {
  id: 7,
  url: EXAMPLE_URL,
  eventTypes: ['order.shipped', 'order.cancelled'],
  description: 'Warehouse dispatch',
  status: 'enabled',
  position: '1042',
  createdAt: '2026-11-20T08:00:00.000Z',
}

/**
 * A webhook endpoint (docs/webhooks.md): a consumer of the order event feed with its own position,
 * to which each event of its types is POSTed in feed order. Unknown values are omitted, never null;
 * the secret is never part of it.
 */
export const WebhookEndpoint = Type.Object(ENDPOINT_FIELDS, {
  $id: 'WebhookEndpoint',
  description: 'A webhook endpoint: a consumer of the order event feed with its own position, sent each event of its types in feed order',
  additionalProperties: false,
  examples: [ENDPOINT_EXAMPLE],
})
export type WebhookEndpoint = Type.Static<typeof WebhookEndpoint>
export const WebhookEndpointRef = Type.Unsafe<WebhookEndpoint>({ $ref: 'WebhookEndpoint#' })

const SECRET = Type.String({
  pattern: WEBHOOK_SECRET_PATTERN,
  description: 'The signing secret: `whsec_` and the base64 of 32 random bytes. Shown only now: store it',
})

/** createWebhookEndpoint's answer: the endpoint and its secret, which is never shown again. */
export const WebhookEndpointCreated = Type.Object(
  { ...ENDPOINT_FIELDS, secret: SECRET },
  {
    $id: 'WebhookEndpointCreated',
    description: 'A new webhook endpoint, with its signing secret (shown only this once)',
    additionalProperties: false,
    examples: [{ ...ENDPOINT_EXAMPLE, secret: EXAMPLE_SECRET }],
  },
)
export type WebhookEndpointCreated = Type.Static<typeof WebhookEndpointCreated>

/** rotateWebhookSecret's answer. */
export const WebhookSecret = Type.Object(
  { secret: SECRET },
  {
    $id: 'WebhookSecret',
    description: 'A new signing secret (shown only this once); the previous one also signs for 24 hours',
    additionalProperties: false,
    examples: [{ secret: EXAMPLE_SECRET }],
  },
)

/** How one delivery went, as an attempt and a ping show it: never the response body, never a secret. */
const DELIVERY_OUTCOME = {
  status: Type.Optional(Type.Integer({ minimum: 100, maximum: 599, description: 'The HTTP status of the response, when one came' })),
  error: Type.Optional(Type.String({ description: 'Why it failed, in a few words (timeout, connection refused, address not allowed, …)' })),
  durationMs: Type.Integer({ minimum: 0, description: 'How long the attempt took, in milliseconds' }),
}

/** One delivery attempt: never the response body, never a secret. */
export const WebhookAttempt = Type.Object(
  {
    eventId: Type.String({ pattern: EVENT_POSITION_PATTERN, description: 'The event\'s feed id (its `webhook-id`)' }),
    attemptedAt: Type.String({ format: 'date-time', description: 'When the attempt started (RFC 3339, UTC)' }),
    ...DELIVERY_OUTCOME,
  },
  {
    $id: 'WebhookAttempt',
    description: 'One delivery attempt to an endpoint',
    additionalProperties: false,
    examples: [{ eventId: '1043', attemptedAt: '2026-11-20T08:15:00.120Z', status: 503, durationMs: 85 }],
  },
)
export type WebhookAttempt = Type.Static<typeof WebhookAttempt>

/** pingWebhookEndpoint's answer: how its test delivery went, as an attempt says it (without an event: a ping is not in the feed). */
export const WebhookPingResult = Type.Object(DELIVERY_OUTCOME, {
  $id: 'WebhookPingResult',
  description:
    'How a test delivery went: `status` when a response came, `error` when it was not a 2xx (or none came), and how long it took',
  additionalProperties: false,
  examples: [{ status: 204, durationMs: 85 }],
})
export type WebhookPingResult = Type.Static<typeof WebhookPingResult>

/** How many attempts listWebhookAttempts shows without a `limit`; at most, every attempt kept (ATTEMPTS_KEPT). */
export const ATTEMPTS_LISTED_DEFAULT = 20

export const WebhookEndpointList = Type.Object(
  { data: Type.Array(WebhookEndpointRef, { description: 'Every endpoint, ascending id' }) },
  { additionalProperties: false },
)

export const WebhookAttemptList = Type.Object(
  { data: Type.Array(Type.Unsafe<WebhookAttempt>({ $ref: 'WebhookAttempt#' }), { description: 'The attempts, newest first' }) },
  { additionalProperties: false },
)

/**
 * What a delivery POSTs (Standard Webhooks' payload), documented as a component: the feed's event as
 * `data`, its type and time beside it. Not a schema any route validates.
 */
export const WebhookDelivery = Type.Object(
  {
    type: Type.String({ enum: [...ORDER_EVENT_TYPES], description: 'The event\'s type' }),
    timestamp: Type.String({ format: 'date-time', description: 'The event\'s `occurredAt`' }),
    data: Type.Unsafe({ $ref: 'OrderEvent#', description: 'The event, exactly as the feed shows it' }),
  },
  {
    $id: 'WebhookDelivery',
    description:
      'The body of a webhook delivery: `POST` to the endpoint\'s URL with `Content-Type: application/json` and the Standard ' +
      'Webhooks headers `webhook-id` (the event\'s feed id: the same on every retry, the receiver\'s idempotency key), ' +
      '`webhook-timestamp` (the attempt\'s Unix seconds) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of ' +
      '"<webhook-id>.<webhook-timestamp>.<body>" keyed by the base64-decoded secret after `whsec_`>`, two space-separated ' +
      'entries for 24 hours after a rotation). A 2xx within the timeout is success; anything else is retried. A test ' +
      'delivery (pingWebhookEndpoint) has the same headers, its `webhook-id` `ping_` and 24 hex characters, and the body ' +
      '`{"type": "webhook.ping", "timestamp", "data": {"endpointId": "<id>"}}`: it is not an event of the feed.',
    additionalProperties: false,
    examples: [
      {
        type: 'order.shipped',
        timestamp: '2026-11-20T08:15:00.000Z',
        data: {
          id: '1043',
          type: 'order.shipped',
          occurredAt: '2026-11-20T08:15:00.000Z',
          // In the order the service writes an order's fields.
          order: { id: 10, complete: false, status: 'shipped', version: 2, petId: 198772, quantity: 7, shipDate: '2026-11-25T10:00:00.000Z', shippedAt: '2026-11-20T08:15:00.000Z' },
        },
      },
    ],
  },
)

export const EndpointIdParams = Type.Object({
  endpointId: Int64({ description: 'The identifier of the webhook endpoint' }),
})

const EVENT_TYPES = Type.Array(Type.Unsafe<OrderEventType>({ type: 'string', enum: [...ORDER_EVENT_TYPES] }), {
  minItems: 1,
  uniqueItems: true,
  description: 'The event types to send, at least one, each once (default: every type)',
})
const URL_FIELD = Type.String({
  minLength: 1,
  maxLength: MAX_WEBHOOK_URL_LENGTH,
  description: 'An https URL whose host resolves only to public addresses (no user name or password)',
  examples: [EXAMPLE_URL],
})
const DESCRIPTION = Type.String({
  maxLength: MAX_WEBHOOK_DESCRIPTION_LENGTH,
  description: 'What the endpoint is for, up to 256 characters; an empty string is none',
})

/** createWebhookEndpoint's body; `http/strict-body.ts` validates it. */
export const CreateWebhookEndpointBody = Type.Object(
  { url: URL_FIELD, eventTypes: Type.Optional(EVENT_TYPES), description: Type.Optional(DESCRIPTION) },
  { additionalProperties: false, examples: [{ url: EXAMPLE_URL, eventTypes: ['order.shipped', 'order.cancelled'], description: 'Warehouse dispatch' }] },
)
export type CreateWebhookEndpointBody = Type.Static<typeof CreateWebhookEndpointBody>

/** updateWebhookEndpoint's body: any of the fields; an empty one changes nothing. */
export const UpdateWebhookEndpointBody = Type.Object(
  {
    url: Type.Optional(URL_FIELD),
    eventTypes: Type.Optional(EVENT_TYPES),
    description: Type.Optional(DESCRIPTION),
    enabled: Type.Optional(
      Type.Boolean({
        description: '`false` disables it (`disabled_by_request`); `true` enables a disabled endpoint again, from its position, its retries cleared (an enabled one is left as it is)',
      }),
    ),
  },
  { additionalProperties: false, examples: [{ enabled: true }] },
)

/** replayWebhookEndpoint's body. `after` is any text to the validator: the route checks it, as the feed checks its own. */
export const ReplayWebhookEndpointBody = Type.Object(
  {
    after: Type.String({
      pattern: EVENT_POSITION_PATTERN, // documented; the route checks it, answering invalid_cursor as the feed does
      description:
        'A feed cursor (a `nextCursor`, or an event\'s `id`): the endpoint is sent every event of its types after it again, in order',
      examples: ['1'],
    }),
  },
  { additionalProperties: false, examples: [{ after: '1' }] },
)

export const ListWebhookAttemptsQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: ATTEMPTS_KEPT,
        default: ATTEMPTS_LISTED_DEFAULT,
        description: `How many attempts at most (1–${ATTEMPTS_KEPT}), newest first`,
        examples: [ATTEMPTS_LISTED_DEFAULT],
      }),
    ),
  },
  { additionalProperties: false },
)
