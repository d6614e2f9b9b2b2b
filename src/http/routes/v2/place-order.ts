import type { FastifyReply } from 'fastify'
import { placeFingerprint } from '../../../domain/idempotency.js'
import type { NewOrder, PlaceRequest } from '../../../domain/orders.js'
import { ApiError } from '../../../errors.js'
import { errorResponses } from '../../../schemas/error.js'
import { NoQuery, OrderV2Ref, PlaceOrderBody, PlaceOrderHeaders, toApiOrderV2 } from '../../../schemas/order-v2.js'
import { toMetadata } from '../../../domain/order-metadata.js'
import { etag } from '../../preconditions.js'
import type { ApiApp } from '../../api-app.js'
import { jsonObjectBody, METADATA_BODY_LIMIT } from '../../strict-body.js'
import { operation } from '../operation.js'

const HOUR_MS = 3_600_000

/** Where a placed order is read from (`Location`), relative to this host as the `Link` of pages is. */
function orderLocation(id: bigint): string {
  return `/v2/store/orders/${id}`
}

/**
 * placeOrder: a new pending order, its id given by the store. With an Idempotency-Key, the key (the
 * API key's own, for IDEMPOTENCY_KEY_TTL_HOURS) and the body's fingerprint are stored in the order's
 * own transaction; a request with a key already used gets the first response again, as it was sent
 * then, not the order as it stands now.
 */
export function placeOrderRoute(app: ApiApp): void {
  const { store, metrics, config } = app
  const ttlMs = config.idempotencyKeyTtlHours * HOUR_MS

  app.post(
    '/store/orders',
    {
      onRequest: app.requireScope('orders:write'),
      preValidation: jsonObjectBody,
      bodyLimit: METADATA_BODY_LIMIT,
      schema: {
        operationId: 'placeOrder',
        ...operation('orders', 'beta'),
        summary: 'Place an order',
        description:
          'Places a new order for `quantity` units of the pet `petId`, `pending` and not `complete`; the service gives ' +
          'it its id (greater than every id the store holds) and answers 201 with the order and its URL in `Location`, ' +
          'once it is durable, with its `order.created` event in the feed. `petId` is not checked against the pets. ' +
          'Send an `Idempotency-Key` to make a retry safe: a request with a key this API key used in the last ' +
          'IDEMPOTENCY_KEY_TTL_HOURS (24 by default) and the same body (however spelled: the order it describes) ' +
          'places nothing and gets the first response again, with `Idempotent-Replayed: true`; with another body it ' +
          'is 422; while the first request with the key is still being processed, 409 with `Retry-After`. Of any ' +
          'number of concurrent requests with one key, on any number of instances, exactly one places an order. ' +
          'Requires the `orders:write` scope, which a key has only when it was given it.',
        headers: PlaceOrderHeaders,
        querystring: NoQuery,
        body: PlaceOrderBody,
        response: {
          201: { ...OrderV2Ref, description: 'The order placed (by this request, or, replayed, by the first with its Idempotency-Key)' },
          ...errorResponses({
            400:
              'The body is missing, not a JSON object, has a field other than `petId`, `quantity`, `shipDate` and `metadata`, ' +
              'or one of them is missing or invalid (`invalid_body`, naming the field or metadata key); the `Idempotency-Key` header is empty, ' +
              'longer than 255 characters, has a character that is not visible ASCII, or is sent twice ' +
              '(`invalid_idempotency_key`); a query parameter was sent (`invalid_parameter`)',
            403: 'The API key lacks the `orders:write` scope (`insufficient_scope`)',
            409:
              'A request with this `Idempotency-Key` is still being processed (`idempotency_key_in_use`): retry after ' +
              '`Retry-After` seconds; or the store holds an order with the greatest int64 id, so no greater id is left ' +
              'and nothing was placed (`order_ids_exhausted`)',
            415: 'The body is not JSON (`unsupported_media_type`): send it with `Content-Type: application/json`',
            422: 'This `Idempotency-Key` was used with another body (`idempotency_key_reused`): a key names one request',
          }),
        },
      },
    },
    async (request, reply) => {
      const { petId, quantity, shipDate, metadata } = request.body as PlaceOrderBody
      const order: NewOrder = { petId, quantity, shipDate: shipDate ?? null, metadata: metadata === undefined ? null : toMetadata(metadata) }
      const key = request.headers['idempotency-key']
      const place: PlaceRequest = { order }
      if (typeof key === 'string') {
        const expiresAt = new Date(Date.now() + ttlMs)
        place.idempotency = { apiKeyId: request.apiKey!.id, key, fingerprint: placeFingerprint(order), expiresAt }
      }
      const result = await store.orders.place(place).catch((error: unknown) => {
        metrics.placed('error')
        throw error
      })
      metrics.placed(result.outcome)
      switch (result.outcome) {
        case 'placed':
          reply.code(201).header('location', orderLocation(result.order.id)).header('etag', etag(result.order.version))
          return toApiOrderV2(result.order)
        case 'replayed':
          // The first response's own bytes: already the Order JSON, sent as they are (no serializer).
          return (reply as unknown as FastifyReply)
            .code(result.status)
            .header('location', orderLocation(result.orderId))
            .header('idempotent-replayed', 'true')
            .header('etag', etag(1)) // the first response's: every order is placed at version 1
            .type('application/json; charset=utf-8')
            .send(result.body)
        case 'key_reused':
          throw new ApiError('idempotency_key_reused')
        case 'key_in_use':
          throw new ApiError('idempotency_key_in_use', undefined, { 'retry-after': '1' })
        case 'ids_exhausted':
          throw new ApiError('order_ids_exhausted')
      }
    },
  )
}
