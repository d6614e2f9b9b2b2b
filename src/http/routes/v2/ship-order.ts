import { toApiOrderV2 } from '../../../domain/order-pages.js'
import { ApiError } from '../../../errors.js'
import { errorResponses } from '../../../schemas/error.js'
import { EmptyBody, NoQuery, OrderV2Ref, ShipOrderParams } from '../../../schemas/order-v2.js'
import type { ApiApp } from '../../api-app.js'
import { jsonObjectBody } from '../../strict-body.js'

/** shipOrder: pending → shipped. Safe to retry: a shipped order is returned as it stands. */
export function shipOrderRoute(app: ApiApp): void {
  const { store, metrics } = app

  app.post(
    '/store/orders/:orderId/ship',
    {
      onRequest: app.requireScope('orders:write'),
      preValidation: jsonObjectBody,
      schema: {
        operationId: 'shipOrder',
        tags: ['orders'],
        summary: 'Ship an order',
        description:
          'Ships a pending order: its `status` becomes `shipped` and `shippedAt` is set; 200 with the order once the ' +
          'change is durable, with its `order.shipped` event in the feed. Safe to retry: an order already shipped is ' +
          'returned as it stands (its first `shippedAt`). A cancelled order cannot be shipped (409); of a ship and a ' +
          'cancel racing on one pending order, on any instances, exactly one wins. No body, or `{}`. Requires the ' +
          '`orders:write` scope.',
        security: [{ bearerAuth: [] }],
        'x-stability': 'beta',
        params: ShipOrderParams,
        querystring: NoQuery,
        body: EmptyBody,
        response: {
          200: { ...OrderV2Ref, description: 'The order, shipped: by this request, or by an earlier one (then as it stands)' },
          ...errorResponses({
            400:
              '`orderId` is not a decimal integer in the int64 range (`invalid_order_id`); the body is neither empty nor ' +
              '`{}` (`invalid_body`); a query parameter was sent (`invalid_parameter`)',
            401: 'The API key is missing, malformed, unknown, expired or revoked (`unauthorized`)',
            403: 'The API key lacks the `orders:write` scope (`insufficient_scope`)',
            404: 'No order has this id (`order_not_found`)',
            409: 'The order has been cancelled and cannot be shipped (`order_cancelled`)',
            415: 'The body is not JSON (`unsupported_media_type`): send none, or `{}` with `Content-Type: application/json`',
          }),
        },
      },
    },
    async (request) => {
      const result = await store.orders.ship(request.params.orderId).catch((error: unknown) => {
        metrics.shipped('error')
        throw error
      })
      metrics.shipped(result.outcome)
      if (result.outcome === 'cancelled') throw new ApiError('order_cancelled')
      if (result.outcome === 'not_found') throw new ApiError('order_not_found', 'No order has this id.')
      return toApiOrderV2(result.order)
    },
  )
}
