import { errorResponses } from '../../../schemas/error.js'
import { EmptyBody, NoQuery, OrderV2Ref, ShipOrderParams, WriteConditionHeaders } from '../../../schemas/order-v2.js'
import type { ApiApp } from '../../api-app.js'
import { jsonObjectBody } from '../../strict-body.js'
import { operation } from '../operation.js'
import { answerOrderWrite, conditionalOrderWrite, INVALID_CONDITIONS, PRECONDITION_FAILED, WRITE_CONDITIONS } from './order-write.js'

/** shipOrder: pending → shipped, answered as every write to an order is (`answerOrderWrite`). */
export function shipOrderRoute(app: ApiApp): void {
  const { store, metrics } = app

  app.post(
    '/store/orders/:orderId/ship',
    {
      onRequest: app.requireScope('orders:write'),
      preValidation: jsonObjectBody,
      schema: {
        operationId: 'shipOrder',
        ...operation('orders', 'beta'),
        summary: 'Ship an order',
        description:
          'Ships a pending order: its `status` becomes `shipped` and `shippedAt` is set; 200 with the order once the ' +
          'change is durable, with its `order.shipped` event in the feed. Safe to retry: an order already shipped is ' +
          'returned as it stands (its first `shippedAt`). A cancelled order cannot be shipped (409); of a ship and a ' +
          'cancel racing on one pending order, on any instances, exactly one wins. No body, or `{}`. Requires the ' +
          '`orders:write` scope; a key without `orders:read` too is answered 204 with no body instead of 200 with the ' +
          'order (a retry is 204 again). ' +
          WRITE_CONDITIONS,
        headers: WriteConditionHeaders,
        params: ShipOrderParams,
        querystring: NoQuery,
        body: EmptyBody,
        response: {
          200: { ...OrderV2Ref, description: 'The order, shipped: by this request, or by an earlier one (then as it stands)' },
          204: { type: 'null', description: 'The order is shipped (by this request or an earlier one); the key lacks `orders:read`, so it is not shown' },
          ...errorResponses({
            400:
              '`orderId` is not a decimal integer in the int64 range (`invalid_order_id`); the body is neither empty nor ' +
              '`{}` (`invalid_body`); a query parameter was sent (`invalid_parameter`); ' + INVALID_CONDITIONS,
            403: 'The API key lacks the `orders:write` scope (`insufficient_scope`)',
            404: 'No order has this id (`order_not_found`)',
            409: 'The order has been cancelled and cannot be shipped (`order_cancelled`)',
            412: PRECONDITION_FAILED,
            415: 'The body is not JSON (`unsupported_media_type`): send none, or `{}` with `Content-Type: application/json`',
          }),
        },
      },
    },
    async (request, reply) =>
      answerOrderWrite(request, reply, conditionalOrderWrite(request, store, request.params.orderId, (expected) => store.orders.ship(request.params.orderId, expected)), (outcome) => metrics.shipped(outcome), {
        cancelled: 'order_cancelled',
      }),
  )
}
