import { errorResponses } from '../../../schemas/error.js'
import { NoQuery } from '../../../schemas/order-v2.js'
import {
  ATTEMPTS_LISTED_DEFAULT,
  EndpointIdParams,
  ListWebhookAttemptsQuery,
  ReplayWebhookEndpointBody,
  WebhookAttemptList,
  WebhookEndpointRef,
} from '../../../schemas/webhook-endpoint.js'
import { rotateWebhookSecret, toApiWebhookAttempt, toApiWebhookEndpoint } from '../../../webhooks/endpoints.js'
import { pingWebhookEndpoint, toApiPingResult, type Deliver } from '../../../webhooks/ping.js'
import type { ApiApp } from '../../api-app.js'
import { jsonObjectBody } from '../../strict-body.js'
import { operation } from '../operation.js'
import { afterPosition, feedCursorError } from './order-events.js'
import {
  BAD_ID,
  BETA,
  endpointNotFound,
  NO_MANAGE_SCOPE,
  NO_SCOPES_TO_SEND_ORDERS,
  NOT_FOUND,
  NOT_JSON,
  SENDS_ORDERS,
} from './webhook-endpoints.js'

/** The refusals of an action on an endpoint that takes no body and needs `webhooks:manage` alone (rotate-secret, ping). */
function noBodyActionErrors(): ReturnType<typeof errorResponses> {
  return errorResponses({
    400: `${BAD_ID}; a body other than empty or \`{}\` was sent (\`invalid_body\`); a query parameter was sent (\`invalid_parameter\`)`,
    403: NO_MANAGE_SCOPE,
    404: NOT_FOUND,
    415: NOT_JSON,
  })
}

/**
 * What is done to a webhook endpoint besides changing it: rotate its secret, replay events, read its
 * attempts, send it a test delivery (through `deliverer`, as the dispatcher's deliveries go).
 */
export function webhookEndpointActionsRoutes(app: ApiApp, deliverer: { deliver: Deliver }): void {
  const { store } = app
  const manage = app.requireScope('webhooks:manage')

  app.post(
    '/webhook-endpoints/:endpointId/rotate-secret',
    {
      onRequest: manage,
      preValidation: jsonObjectBody,
      schema: {
        operationId: 'rotateWebhookSecret',
        ...operation('webhooks', 'beta'),
        summary: "Rotate a webhook endpoint's signing secret",
        description:
          'Gives the endpoint a new signing secret and returns it (shown only now). For 24 hours the previous secret signs ' +
          'too: `webhook-signature` then holds two entries, so a receiver verifies with either while it switches. ' +
          'Rotating again within the 24 hours ends the older secret at once. No body. ' +
          BETA,
        params: EndpointIdParams,
        querystring: NoQuery,
        body: NoQuery,
        response: {
          200: { $ref: 'WebhookSecret#', description: 'The new secret (shown only this once)' },
          ...noBodyActionErrors(),
        },
      },
    },
    async (request) => {
      const secret = await rotateWebhookSecret(store.webhooks, request.params.endpointId)
      if (secret === undefined) throw endpointNotFound()
      return { secret }
    },
  )

  app.post(
    '/webhook-endpoints/:endpointId/replay',
    {
      onRequest: app.requireScope('webhooks:manage', 'orders:read'),
      preValidation: jsonObjectBody,
      schema: {
        operationId: 'replayWebhookEndpoint',
        ...operation('webhooks', 'beta'),
        summary: 'Send a webhook endpoint events again, from a cursor',
        description:
          "Moves the endpoint's position to `after` and enables it: it is sent every event of its types after that cursor " +
          'again, in order, from the next one (each with the same `webhook-id` as before). A cursor is a `nextCursor` of the ' +
          'event feed or an event\'s `id`; it may be before or after the current position. The 202 is sent once the new ' +
          'position is stored; deliveries follow. ' +
          `${BETA} ${SENDS_ORDERS}`,
        params: EndpointIdParams,
        querystring: NoQuery,
        body: ReplayWebhookEndpointBody,
        response: {
          202: { ...WebhookEndpointRef, description: 'The endpoint, enabled, at its new position' },
          ...errorResponses({
            400:
              `${BAD_ID}; the body is not a JSON object with \`after\` alone, a string (\`invalid_body\`); \`after\` is not a ` +
              'cursor of the feed: malformed, or past its end (`invalid_cursor`); a query parameter was sent (`invalid_parameter`)',
            403: NO_SCOPES_TO_SEND_ORDERS,
            404: NOT_FOUND,
            410: 'Events after `after` have been deleted by retention (`events_expired`): replay from a later cursor',
            415: NOT_JSON,
          }),
        },
      },
    },
    async (request, reply) => {
      const after = afterPosition(request.body.after)
      const endpoint = await store.webhooks.replay(request.params.endpointId, after).catch((error: unknown) => {
        throw feedCursorError(error, after, 'replay from a later cursor')
      })
      if (endpoint === undefined) throw endpointNotFound()
      return reply.code(202).send(toApiWebhookEndpoint(endpoint))
    },
  )

  app.get(
    '/webhook-endpoints/:endpointId/attempts',
    {
      onRequest: manage,
      schema: {
        operationId: 'listWebhookAttempts',
        ...operation('webhooks', 'beta'),
        summary: "List a webhook endpoint's delivery attempts",
        description:
          'Returns the latest delivery attempts to the endpoint, newest first, at most `limit` (the last 100 are kept): ' +
          'the event, when, the status of the response or a short error, and how long it took. Never a response body. ' +
          BETA,
        params: EndpointIdParams,
        querystring: ListWebhookAttemptsQuery,
        response: {
          200: { ...WebhookAttemptList, description: 'The attempts, newest first' },
          ...errorResponses({
            400: `${BAD_ID}; a query parameter is unknown, repeated or invalid (\`invalid_parameter\`)`,
            403: NO_MANAGE_SCOPE,
            404: NOT_FOUND,
          }),
        },
      },
    },
    async (request) => {
      const attempts = await store.webhooks.attempts(request.params.endpointId, request.query.limit ?? ATTEMPTS_LISTED_DEFAULT)
      if (attempts === undefined) throw endpointNotFound()
      return { data: attempts.map(toApiWebhookAttempt) }
    },
  )

  app.post(
    '/webhook-endpoints/:endpointId/ping',
    {
      onRequest: manage,
      preValidation: jsonObjectBody,
      schema: {
        operationId: 'pingWebhookEndpoint',
        ...operation('webhooks', 'beta'),
        summary: 'Send a webhook endpoint a test delivery',
        description:
          'Sends the endpoint one signed delivery now, of type `webhook.ping`, outside the feed, and answers how it went: ' +
          'the status of the response when one came, a short error when it was not a 2xx, and how long it took (200 ' +
          'whatever the receiver answered). The body is `{"type": "webhook.ping", "timestamp": <now>, "data": ' +
          '{"endpointId": "<id>"}}`, with the headers of every delivery: its own `webhook-id`, `ping_` and 24 hex ' +
          'characters (never a feed id), signed with the current secret and, for 24 hours after a rotation, the previous ' +
          "one. It goes to the endpoint's URL, enabled or disabled, by the rules of every delivery (the URL policy at " +
          'connection, WEBHOOK_TIMEOUT_MS, at most 64 KB of the response read, redirects not followed), and changes ' +
          'nothing: not the position, not the status (a 410 disables nothing), not the attempts. It may arrive while an ' +
          "event is being delivered to the endpoint. It carries no order, so `webhooks:manage` alone allows it. No body. " +
          'One ping per endpoint is in flight at a time, whichever instance sends it: another meanwhile is answered 409 at ' +
          'once. Each ping counts against the API key\'s rate limit as any request does. ' +
          BETA,
        params: EndpointIdParams,
        querystring: NoQuery,
        body: NoQuery,
        response: {
          200: { $ref: 'WebhookPingResult#', description: 'How the test delivery went' },
          ...noBodyActionErrors(),
          ...errorResponses({
            409:
              'A ping to this endpoint, sent by another request (on any instance) or the CLI, is still in flight ' +
              '(`ping_in_flight`): nothing was sent; ping again once it is answered (within WEBHOOK_TIMEOUT_MS)',
          }),
        },
      },
    },
    async (request, reply) => {
      const { endpointId } = request.params
      // A client gone (or the server closing its connection at shutdown) ends the delivery too.
      const gone = new AbortController()
      const abort = (): void => gone.abort()
      reply.raw.once('close', abort)
      let result
      try {
        result = await pingWebhookEndpoint(store.webhooks, (delivery, signal) => deliverer.deliver(delivery, signal), endpointId, {
          timeoutMs: app.config.webhooks.timeoutMs,
          signal: gone.signal,
        })
      } finally {
        reply.raw.off('close', abort)
      }
      if (result === undefined) throw endpointNotFound()
      request.log.info({ endpointId: endpointId.toString(), status: result.status, error: result.error, durationMs: result.durationMs }, 'webhook endpoint pinged')
      return toApiPingResult(result)
    },
  )
}
