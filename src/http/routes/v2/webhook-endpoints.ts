import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { ApiError } from '../../../errors.js'
import { errorResponses } from '../../../schemas/error.js'
import { NoQuery } from '../../../schemas/order-v2.js'
import {
  CreateWebhookEndpointBody,
  EndpointIdParams,
  UpdateWebhookEndpointBody,
  WebhookEndpointList,
  WebhookEndpointRef,
  type WebhookEndpointCreated,
} from '../../../schemas/webhook-endpoint.js'
import { createWebhookEndpoint, toApiWebhookEndpoint, toEndpointPatch } from '../../../webhooks/endpoints.js'
import type { ApiApp } from '../../api-app.js'
import { insufficientScope } from '../../authenticator.js'
import { jsonObjectBody } from '../../strict-body.js'
import { operation } from '../operation.js'

export const NO_MANAGE_SCOPE = 'The API key lacks the `webhooks:manage` scope (`insufficient_scope`)'
export const NOT_FOUND = 'No webhook endpoint has this id (`webhook_endpoint_not_found`)'
export const BAD_ID = '`endpointId` is not a decimal integer in the int64 range (`invalid_endpoint_id`)'
export const NOT_JSON = 'The body is not JSON (`unsupported_media_type`): send it with `Content-Type: application/json`'
const URL_REFUSED =
  'the URL is not https, names a user or password, contains whitespace or control characters, its host is a loopback, ' +
  'private, link-local or unique-local address, or its host name does not resolve to a public address within 5 s ' +
  '(`invalid_webhook_url`, saying which)'
export const BETA =
  'Beta: the shape may still change. Requires the `webhooks:manage` scope, which no key has unless it was given it.'
/** What creating an endpoint, replaying one or changing its URL needs besides `webhooks:manage`, and why. */
export const SENDS_ORDERS =
  'It also requires `orders:read`: an endpoint is sent the orders of its events, so only a key that may read orders ' +
  'chooses where they go, or sends them again.'
export const NO_SCOPES_TO_SEND_ORDERS =
  'The API key lacks the `webhooks:manage` scope, or `orders:read` (`insufficient_scope`, naming each one it lacks)'

export function endpointNotFound(): ApiError {
  return new ApiError('webhook_endpoint_not_found')
}

/**
 * A preValidation hook of the PATCH: a body that sets `url` points the endpoint's orders at another
 * URL, so it needs `orders:read` as creating one does — checked before the body is validated, so a
 * key without it is 403 whatever the rest of the body holds. A body that does not set `url` needs
 * only `webhooks:manage`.
 */
function urlNeedsOrdersRead(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const body = request.body
  const setsUrl = typeof body === 'object' && body !== null && Object.hasOwn(body, 'url')
  done(setsUrl && !request.apiKey!.scopes.includes('orders:read') ? insufficientScope(['orders:read']) : undefined)
}

/** v2's webhook endpoints (docs/webhooks.md): create, list, show, change and delete them. */
export function webhookEndpointsRoutes(app: ApiApp): void {
  const { store, config } = app
  const manage = app.requireScope('webhooks:manage')

  app.post(
    '/webhook-endpoints',
    {
      onRequest: app.requireScope('webhooks:manage', 'orders:read'),
      preValidation: jsonObjectBody,
      schema: {
        operationId: 'createWebhookEndpoint',
        ...operation('webhooks', 'beta'),
        summary: 'Create a webhook endpoint',
        description:
          'Creates an endpoint to which every event of the order feed of its `eventTypes` (default: every type) is POSTed, ' +
          'in feed order, each after the previous one got a 2xx. It starts at the head of the feed: it is sent every event ' +
          'committed after its creation. Answers with the endpoint and its signing `secret`, which is shown only now (and ' +
          'by rotateWebhookSecret). The URL must be https and its host must resolve only to public addresses (unless the ' +
          'service allows private networks). At most WEBHOOK_MAX_ENDPOINTS endpoints exist (100 by default). ' +
          `${BETA} ${SENDS_ORDERS}`,
        querystring: NoQuery,
        body: CreateWebhookEndpointBody,
        response: {
          201: { $ref: 'WebhookEndpointCreated#', description: 'The endpoint, enabled, with its secret (shown only this once)' },
          ...errorResponses({
            400:
              'The body is missing, not a JSON object, has a field other than `url`, `eventTypes` and `description`, `url` is ' +
              'missing, `eventTypes` is empty or has an unknown or repeated type, or `description` is longer than 256 ' +
              `characters (\`invalid_body\`, naming the field); ${URL_REFUSED}; a query parameter was sent (\`invalid_parameter\`)`,
            403: NO_SCOPES_TO_SEND_ORDERS,
            409: 'As many endpoints exist as WEBHOOK_MAX_ENDPOINTS allows (`webhook_endpoint_limit`): delete one first',
            415: NOT_JSON,
          }),
        },
      },
    },
    async (request, reply) => {
      const { endpoint, secret } = await createWebhookEndpoint(store.webhooks, config.webhooks, request.body)
      reply.code(201).header('location', `/v2/webhook-endpoints/${endpoint.id}`)
      const created: WebhookEndpointCreated = { ...toApiWebhookEndpoint(endpoint), secret }
      return created
    },
  )

  app.get(
    '/webhook-endpoints',
    {
      onRequest: manage,
      schema: {
        operationId: 'listWebhookEndpoints',
        ...operation('webhooks', 'beta'),
        summary: 'List the webhook endpoints',
        description: `Returns every endpoint, ascending id, without secrets. ${BETA}`,
        querystring: NoQuery,
        response: {
          200: { ...WebhookEndpointList, description: 'Every endpoint, ascending id' },
          ...errorResponses({ 400: 'A query parameter was sent (`invalid_parameter`)', 403: NO_MANAGE_SCOPE }),
        },
      },
    },
    async () => ({ data: (await store.webhooks.list()).map(toApiWebhookEndpoint) }),
  )

  app.get(
    '/webhook-endpoints/:endpointId',
    {
      onRequest: manage,
      schema: {
        operationId: 'getWebhookEndpoint',
        ...operation('webhooks', 'beta'),
        summary: 'Show a webhook endpoint',
        description: `Returns the endpoint: its status, position in the feed, and when its failing event is tried again. ${BETA}`,
        params: EndpointIdParams,
        querystring: NoQuery,
        response: {
          200: { ...WebhookEndpointRef, description: 'The endpoint' },
          ...errorResponses({ 400: `${BAD_ID}; a query parameter was sent (\`invalid_parameter\`)`, 403: NO_MANAGE_SCOPE, 404: NOT_FOUND }),
        },
      },
    },
    async (request) => {
      const endpoint = await store.webhooks.find(request.params.endpointId)
      if (endpoint === undefined) throw endpointNotFound()
      return toApiWebhookEndpoint(endpoint)
    },
  )

  app.patch(
    '/webhook-endpoints/:endpointId',
    {
      onRequest: manage,
      preValidation: [urlNeedsOrdersRead, jsonObjectBody],
      schema: {
        operationId: 'updateWebhookEndpoint',
        ...operation('webhooks', 'beta'),
        summary: 'Change a webhook endpoint',
        description:
          'Changes the fields given and leaves the others; an empty body changes nothing. `enabled: false` disables the ' +
          'endpoint (`disabled_by_request`); `enabled: true` enables it again, from the position it stopped at, its ' +
          'failures and retries cleared (an endpoint enabled already is left as it is, a retry it waits for included). A new ' +
          '`url` is checked as at creation. ' +
          `${BETA} A body with \`url\` also requires \`orders:read\`, as creating an endpoint does; any other body, ` +
          '`webhooks:manage` alone. A key without `webhooks:manage` is refused before its body is read: its 403 names ' +
          '`orders:read` only once the key has `webhooks:manage`.',
        params: EndpointIdParams,
        querystring: NoQuery,
        body: UpdateWebhookEndpointBody,
        response: {
          200: { ...WebhookEndpointRef, description: 'The endpoint, changed' },
          ...errorResponses({
            400:
              `${BAD_ID}; the body is not a JSON object, has an unknown field, or a field with an invalid value ` +
              `(\`invalid_body\`, naming it); ${URL_REFUSED}; a query parameter was sent (\`invalid_parameter\`)`,
            403: 'The API key lacks the `webhooks:manage` scope, or the body sets `url` and it lacks `orders:read` (`insufficient_scope`)',
            404: NOT_FOUND,
            415: NOT_JSON,
          }),
        },
      },
    },
    async (request) => {
      const { endpointId } = request.params
      // An unknown endpoint is 404 before its URL is looked up: nothing is resolved for nothing.
      if ((await store.webhooks.find(endpointId)) === undefined) throw endpointNotFound()
      const patch = await toEndpointPatch(request.body ?? {}, config.webhooks)
      const endpoint = await store.webhooks.update(endpointId, patch)
      if (endpoint === undefined) throw endpointNotFound()
      return toApiWebhookEndpoint(endpoint)
    },
  )

  app.delete(
    '/webhook-endpoints/:endpointId',
    {
      onRequest: manage,
      schema: {
        operationId: 'deleteWebhookEndpoint',
        ...operation('webhooks', 'beta'),
        summary: 'Delete a webhook endpoint',
        description: `Deletes the endpoint and its attempts; a delivery in flight to it is its last. ${BETA}`,
        params: EndpointIdParams,
        querystring: NoQuery,
        response: {
          204: { type: 'null', description: 'The endpoint is deleted' },
          ...errorResponses({ 400: `${BAD_ID}; a query parameter was sent (\`invalid_parameter\`)`, 403: NO_MANAGE_SCOPE, 404: NOT_FOUND }),
        },
      },
    },
    async (request, reply) => {
      if (!(await store.webhooks.remove(request.params.endpointId))) throw endpointNotFound()
      return reply.code(204).send(null)
    },
  )
}
