import { errorResponses } from '../../../schemas/error.js'
import { CancelOrderBody, NoQuery, OrderIdV2Params, OrderV2Ref, WriteConditionHeaders } from '../../../schemas/order-v2.js'
import type { ApiApp } from '../../api-app.js'
import { jsonObjectBody } from '../../strict-body.js'
import { operation } from '../operation.js'
import { answerOrderWrite, conditionalOrderWrite, INVALID_CONDITIONS, PRECONDITION_FAILED, WRITE_CONDITIONS } from './order-write.js'

/**
 * v2's cancel, answered as every write to an order is (`answerOrderWrite`): the order as it stands
 * shows the first cancellation's time and reason, whether this request cancelled it or an earlier
 * one did.
 */
export function cancelOrderV2Route(app: ApiApp): void {
  const { store, metrics } = app

  app.post(
    '/store/orders/:orderId/cancel',
    {
      onRequest: app.requireScope('orders:cancel'),
      preValidation: jsonObjectBody,
      schema: {
        operationId: 'cancelOrder',
        ...operation('orders', 'beta'),
        summary: 'Cancel an order',
        description:
          'Cancels a pending order and returns it, with `status` `cancelled`, `cancelledAt` and the `reason` given, if any. ' +
          'The 200 is sent only once the cancellation is durable. Safe to retry: an order already cancelled (by this ' +
          'request before a lost response, by another client, or through v1) is returned as it stands, with the first ' +
          'cancellation\'s time and reason — a retry with another reason does not change them. Of any number of ' +
          'concurrent cancels of one order, on any number of instances, exactly one cancels it and all of them return ' +
          'the same `cancelledAt`. A shipped order cannot be cancelled (409). The body is optional; without one, no ' +
          'reason is recorded. Requires the `orders:cancel` scope; a key without `orders:read` too is answered 204 ' +
          'with no body instead of 200 with the order (a retry is 204 again). ' +
          WRITE_CONDITIONS,
        headers: WriteConditionHeaders,
        params: OrderIdV2Params,
        querystring: NoQuery,
        body: CancelOrderBody,
        response: {
          200: { ...OrderV2Ref, description: 'The order, cancelled: by this request, or by an earlier one (then as that one left it)' },
          204: { type: 'null', description: 'The order is cancelled (by this request or an earlier one); the key lacks `orders:read`, so it is not shown' },
          ...errorResponses({
            400:
              '`orderId` is not a decimal integer in the int64 range (`invalid_order_id`); the body is not a JSON object, ' +
              'has a field other than `reason`, or `reason` is not one of the five (`invalid_body`); a query parameter was ' +
              'sent (`invalid_parameter`); ' + INVALID_CONDITIONS,
            403: 'The API key lacks the `orders:cancel` scope (`insufficient_scope`)',
            404: 'No order has this id (`order_not_found`)',
            409: 'The order has already shipped and cannot be cancelled (`order_already_shipped`)',
            412: PRECONDITION_FAILED,
            415: 'The body is not JSON (`unsupported_media_type`): send it with `Content-Type: application/json`, or send none',
          }),
        },
      },
    },
    async (request, reply) => {
      const { orderId } = request.params
      const cancel = conditionalOrderWrite(request, store, orderId, (expected) => store.orders.cancel(orderId, request.apiKey!.id, request.body?.reason ?? null, expected))
      return answerOrderWrite(request, reply, cancel, (outcome) => metrics.cancelled(outcome), { already_shipped: 'order_already_shipped' })
    },
  )
}
