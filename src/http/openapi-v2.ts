import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import type { Config } from '../config.js'
import { ERRORS, errorBody, V2_ERROR_CODES, type ErrorCode } from '../errors.js'
import { EVENT_POSITION_PATTERN } from '../schemas/order-event.js'
import { documentOptions, type OperationsOf } from './openapi.js'
import { MERGE_PATCH_MEDIA_TYPE } from './strict-body.js'

/** The name of the v2 document's decorator (v1's is `swagger`). */
export const SWAGGER_V2 = 'swaggerV2'

/** The v2 document's options, registered in the `/v2` context: from the schemas of the v2 routes. */
export function openApiV2Document(config: Config): FastifyDynamicSwaggerOptions & { decorator: string } {
  return {
    decorator: SWAGGER_V2,
    ...documentOptions(config, {
      prefix: '/v2',
      version: '2.0.0-beta.1',
      description:
        'Orders placed in the pet store, version 2 (beta): pages of orders with filters, each order with its status, ' +
        'placing, shipping, completing and cancelling orders, and a feed of the changes to orders (experimental). ' +
        'Every operation needs a bearer API key (`Authorization: Bearer <API_KEY>`). int64 ids are exact JSON integer ' +
        'literals — parse them losslessly. Version 1 stays fully supported.\n\n' +
        'Pages are keyset-paginated: follow `nextCursor` (or the `Link` header with `rel="next"`) with the same ' +
        'filters until it is absent. A cursor needs no server state and stays valid across instances and restarts.\n\n' +
        'The event feed (`listOrderEvents`) has no last page: every page has a `nextCursor`, and a client that resumes ' +
        'from each one receives every change exactly once, in the order it was committed; `wait` makes a request a ' +
        'long poll.\n\n' +
        'Webhooks (beta) push the same feed: each webhook endpoint is a consumer of the feed with its own position, ' +
        'POSTed each event of its types in feed order, signed per Standard Webhooks (the `WebhookDelivery` schema shows ' +
        'a delivery). Managing endpoints needs the `webhooks:manage` scope, which no key has by default.\n\n' +
        'An order is `pending` when placed, then `shipped` (`shipOrder`), then `complete` (`completeOrder`); only a ' +
        'pending order can be cancelled. Every write is durable before its answer and safe to retry: placeOrder with ' +
        'an `Idempotency-Key`, the others by their nature (an order already shipped, complete or cancelled is returned ' +
        'as it stands). Placing, shipping and completing need the `orders:write` scope, which no key has by default.\n\n' +
        'An order can be changed while pending (`updateOrder`, a JSON Merge Patch; its `metadata` in any state). Every order ' +
        'carries a `version`, answered as `ETag`: send it in `If-Match` with a write to change the order only if nobody else ' +
        'has since (412 otherwise), and in `If-None-Match` with getOrder for a 304 while it is unchanged.\n\n' +
        'Every error, of every status, has the body `{code, message, status}`; `message` names the parameter at ' +
        'fault. Any request may also get 429 (with `Retry-After`), 500 or 503. Error codes:',
      tags: [
        { name: 'orders', description: 'Orders placed in the store' },
        { name: 'webhooks', description: 'Webhook endpoints: the order event feed, pushed (beta)' },
      ],
      components: ['Order', 'OrderEvent', 'WebhookEndpoint', 'WebhookEndpointCreated', 'WebhookSecret', 'WebhookAttempt', 'WebhookPingResult', 'WebhookDelivery', 'Error'],
      // The v2 Order is `Order`; v1's (a shared schema of the app) is dropped.
      names: { OrderV2: 'Order', Order: 'OrderV1' },
      codes: V2_ERROR_CODES,
      messages: V2_MESSAGES,
      finish: (document) => {
        const error = document.components?.schemas?.Error as { example?: unknown } | undefined
        if (error !== undefined) error.example = errorBody('order_not_found', V2_MESSAGES.order_not_found)
        return withDeliveryCallback(withHeaders(withDefaultErrors(withDeepObjects(withEventPositions(requiredBodies(document))))))
      },
    }),
  }
}

/**
 * @fastify/swagger marks every request body required (Fastify's own validator needs one). The app's
 * body validator (strict-body.ts) takes a request without a body as an empty one, so a body is
 * required where the operation refuses that: its schema requires a field (placeOrder's petId), or it
 * is a JSON Merge Patch (updateOrder: an empty body is no JSON document, RFC 7396). The others
 * (cancelOrder's optional reason, shipOrder's `{}`) take none.
 */
function requiredBodies(document: OperationsOf): OperationsOf {
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      const body = (operation as { requestBody?: RequestBody } | undefined)?.requestBody
      if (body === undefined) continue
      const fields = Object.values(body.content).some((media) => (media.schema?.required?.length ?? 0) > 0)
      body.required = fields || MERGE_PATCH_MEDIA_TYPE in body.content
    }
  }
  return document
}

interface RequestBody {
  required?: boolean
  content: Record<string, { schema?: { required?: string[] } }>
}

/** The messages v2 sends for a code in place of v1's (which also says "or has been cancelled"). */
export const V2_MESSAGES: Partial<Record<ErrorCode, string>> = { order_not_found: 'No order has this id.' }

/** What any request may get besides the errors an operation lists: its `default` response. */
export const DEFAULT_ERROR_CODES = [
  'request_timeout',
  'payload_too_large',
  'uri_too_long',
  'rate_limited',
  'headers_too_large',
  'internal_error',
  'service_unavailable',
] as const satisfies readonly ErrorCode[]

type Responses = Record<string, { description?: string; content?: object; headers?: Record<string, object> }>
type Parameter = { name: string; in: string; schema?: { type?: string; pattern?: string }; style?: string; explode?: boolean }
type Operation = { operationId?: string; responses?: Responses; parameters?: Parameter[] }
type Document = OperationsOf & { components?: { headers?: Record<string, object> } }

function operations(document: OperationsOf): Operation[] {
  return Object.values(document.paths ?? {}).flatMap((item) => Object.values(item) as Operation[])
}

/** Every operation's `default`: the Error of a request too large, too slow or too many, or of the service. */
function withDefaultErrors(document: OperationsOf): OperationsOf {
  for (const operation of operations(document)) {
    operation.responses = {
      ...operation.responses,
      default: {
        description:
          'Any request may also get one of these: ' +
          DEFAULT_ERROR_CODES.map((code) => `${ERRORS[code].status} \`${code}\``).join(', ') +
          '. 429 and 503 say in `Retry-After` when to retry.',
        content: {
          'application/json': {
            schema: { $ref: '#/components/schemas/Error' },
            examples: Object.fromEntries(DEFAULT_ERROR_CODES.map((code) => [code, { summary: ERRORS[code].message, value: errorBody(code) }])),
          },
        },
      },
    }
  }
  return document
}

/**
 * The response headers, each declared on the responses that send it. `X-Request-Id`, `RateLimit`
 * and `RateLimit-Policy` go on every response (the two limits' headers on any that follows counting
 * a known key, and on every 429), `WWW-Authenticate` on 401 and 403, `Retry-After` with 429 and 503
 * (`default`) and with placeOrder's 409 `idempotency_key_in_use`, `Link` on listOrders' pages that
 * have a next one, `Location` and `Idempotent-Replayed` on placeOrder's 201, `Location` on createWebhookEndpoint's 201,
 * `ETag` on every answer that names an order's version (ETAG_RESPONSES).
 */
function withHeaders(document: Document): Document {
  const ref = (name: string) => ({ $ref: `#/components/headers/${name}` })
  for (const operation of operations(document)) {
    for (const [status, response] of Object.entries(operation.responses ?? {})) {
      const headers: Record<string, object> = { 'X-Request-Id': ref('X-Request-Id'), RateLimit: ref('RateLimit'), 'RateLimit-Policy': ref('RateLimit-Policy') }
      if (status === '401' || status === '403') headers['WWW-Authenticate'] = ref('WWW-Authenticate')
      if (status === 'default') headers['Retry-After'] = ref('Retry-After')
      if (status === '200' && operation.operationId === 'listOrders') headers.Link = ref('Link')
      if (status === '201' && operation.operationId === 'placeOrder') {
        headers.Location = ref('Location')
        headers['Idempotent-Replayed'] = ref('Idempotent-Replayed')
      }
      if (status === '409' && operation.operationId === 'placeOrder') headers['Retry-After'] = ref('Retry-After')
      if (status === '201' && operation.operationId === 'createWebhookEndpoint') headers.Location = ref('Location')
      if (ETAG_RESPONSES[operation.operationId ?? '']?.includes(status)) headers.ETag = ref('ETag')
      response.headers = headers
    }
  }
  document.components = { ...document.components, headers: HEADERS }
  return document
}

/** The responses that carry the order's `ETag`: an order shown or written, and a 412 (the current version). */
const ETAG_RESPONSES: Record<string, string[]> = {
  getOrder: ['200', '304'],
  placeOrder: ['201'],
  updateOrder: ['200', '204', '412'],
  shipOrder: ['200', '204', '412'],
  completeOrder: ['200', '204', '412'],
  cancelOrder: ['200', '204', '412'],
}

const HEADERS: Record<string, { description: string; schema: object }> = {
  ETag: {
    description:
      "The order's version, quoted (`\"3\"`): the `version` of the order shown or written (on a 412, the current one). Send it " +
      'back in `If-Match` to change the order only if it is still at that version, or in `If-None-Match` to getOrder for a 304 ' +
      'while it is.',
    schema: { type: 'string', pattern: '^"[1-9][0-9]*"$', example: '"3"' },
  },
  'X-Request-Id': {
    description:
      "The request's id, as the service logs it: the request's own `X-Request-Id` when that is 1–128 characters of " +
      '`A-Za-z0-9._:-`, else a new UUID. On every response.',
    schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
  },
  RateLimit: {
    description:
      'What is left of a rate limit in its current window: `"per-key";r=<requests left>;t=<seconds until the window resets>`. ' +
      'Sent once the API key is known (each key may make a number of requests a minute); on a 429, the limit exceeded: ' +
      '`per-key`, or `auth-failures` (failed authentications a minute from one address: no key, or one no key has). ' +
      'Not sent when the limit is off.',
    schema: { type: 'string', example: '"per-key";r=1187;t=42' },
  },
  'RateLimit-Policy': {
    description: 'The rate limit `RateLimit` reports on: `"<name>";q=<requests>;w=<seconds of the window>`.',
    schema: { type: 'string', example: '"per-key";q=1200;w=60' },
  },
  'Retry-After': {
    description:
      "Seconds to wait before retrying: on 429, until the rate limit's window resets; on 503, a short pause; on placeOrder's " +
      '409 `idempotency_key_in_use`, while the first request with the key finishes (`order_ids_exhausted` has none: a retry cannot succeed).',
    schema: { type: 'integer', minimum: 1 },
  },
  'WWW-Authenticate': {
    description:
      'The Bearer challenge (RFC 6750): `Bearer realm="petstore"`, with `error="invalid_token"` and an `error_description` ' +
      'when a bearer token was sent (401), or `error="insufficient_scope", scope="<the scope needed>"` (403).',
    schema: { type: 'string', example: 'Bearer realm="petstore", error="insufficient_scope", scope="orders:read"' },
  },
  Location: {
    description:
      "The new resource's URL, relative to this host: the placed order's `/v2/store/orders/{id}` (getOrder; also on a " +
      "replayed response), or the new webhook endpoint's `/v2/webhook-endpoints/{id}` (getWebhookEndpoint).",
    schema: { type: 'string', example: '/v2/store/orders/1001' },
  },
  'Idempotent-Replayed': {
    description:
      '`true` on a response given again to a request whose `Idempotency-Key` was used before with the same body: nothing ' +
      'was placed; the status, body and `Location` are those of the first response. Absent on any other response.',
    schema: { type: 'string', enum: ['true'] },
  },
  Link: {
    description:
      'The next page, when there is one: `<path?query>; rel="next"`, a URL relative to this host with the same ' +
      'parameters and the new cursor (the same as `nextCursor`).',
    schema: { type: 'string', example: '</v2/store/orders?limit=100&cursor=AbC123>; rel="next"' },
  },
}

/**
 * What a webhook endpoint receives, as OpenAPI 3.0 says it: a callback of createWebhookEndpoint, a
 * POST to the `url` of its body, with the WebhookDelivery body and the Standard Webhooks headers.
 */
function withDeliveryCallback(document: OperationsOf): OperationsOf {
  const create = operations(document).find((operation) => operation.operationId === 'createWebhookEndpoint') as
    | (Operation & { callbacks?: object })
    | undefined
  if (create === undefined) return document
  const header = (name: string, description: string, example: string) => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string' },
    example,
  })
  create.callbacks = {
    webhookDelivery: {
      '{$request.body#/url}': {
        post: {
          operationId: 'deliverWebhookEvent',
          tags: ['webhooks'],
          summary: 'An event delivered to a webhook endpoint',
          description:
            'Each event of the endpoint\'s types, in feed order: the next one is sent only after this one got a 2xx within ' +
            'WEBHOOK_TIMEOUT_MS (15 s by default). Anything else — a 3xx (redirects are not followed), 4xx, 5xx, a timeout, ' +
            'a refused connection — is retried, the same event with the same `webhook-id`, after each delay of ' +
            'WEBHOOK_RETRY_SCHEDULE (5s, 5m, 30m, 2h, 5h, 10h, 14h, 20h, 24h by default, each ±10%); 429 and 503 with ' +
            '`Retry-After` wait at least that long; 410 disables the endpoint at once, as does the end of the schedule. ' +
            'At least once: handle each `webhook-id` once. Verify the signature on the raw body (the `standardwebhooks` ' +
            'package\'s `Webhook.verify` does) before trusting it. At most 64 KB of the response is read.',
          security: [],
          'x-stability': 'beta',
          parameters: [
            header(
              'webhook-id',
              "The event's feed id: the same on every retry, the receiver's idempotency key and its cursor into the feed",
              '1043',
            ),
            header('webhook-timestamp', "The attempt's Unix time in seconds: refuse one far from now (Standard Webhooks allows 5 minutes)", '1795162500'),
            header(
              'webhook-signature',
              '`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` keyed by the base64-decoded ' +
                'secret after `whsec_`; for 24 hours after a rotation, two such entries separated by a space (the new and ' +
                'the previous secret): accept either. The example signs the WebhookDelivery example (as compact JSON) with ' +
                "the WebhookSecret example's secret",
              'v1,FtW1H1Tx5z9UDVdIc8sJPeTEU2rd8OtOVLXSWEgcgrA=',
            ),
          ],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/WebhookDelivery' } } },
          },
          responses: {
            '200': { description: 'Any 2xx within the timeout: received; the next event follows' },
            '410': { description: 'Gone: the endpoint is disabled at once (`disabledReason` `endpoint_gone`)' },
            default: { description: 'Anything else, or no answer in time: the same event is sent again later' },
          },
        },
      },
    },
  }
  return document
}

/**
 * A query parameter that is an object (listOrders' `metadata`) is read one key at a time,
 * `metadata[KEY]=VALUE` (strict-query.ts): OpenAPI's deepObject style. @fastify/swagger takes a
 * parameter's style from the whole query schema only, so it is declared here, on the parameter.
 */
function withDeepObjects(document: OperationsOf): OperationsOf {
  for (const operation of operations(document)) {
    for (const parameter of operation.parameters ?? []) {
      if (parameter.in !== 'query' || parameter.schema?.type !== 'object') continue
      parameter.style = 'deepObject'
      parameter.explode = true
    }
  }
  return document
}

/**
 * The event feed's `after` is checked by the route (a malformed one is `invalid_cursor`, not
 * `invalid_parameter`); the document declares the pattern that check enforces.
 */
function withEventPositions(document: OperationsOf): OperationsOf {
  for (const operation of operations(document)) {
    if (operation.operationId !== 'listOrderEvents') continue
    const after = operation.parameters?.find((parameter) => parameter.name === 'after' && parameter.in === 'query')
    if (after !== undefined) after.schema = { ...after.schema, pattern: EVENT_POSITION_PATTERN }
  }
  return document
}
