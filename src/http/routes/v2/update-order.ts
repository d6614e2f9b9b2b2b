import type { OrderPatch } from '../../../domain/order-patch.js'
import { ApiError } from '../../../errors.js'
import { errorResponses } from '../../../schemas/error.js'
import { WriteConditionHeaders, NoQuery, OrderIdV2Params, OrderV2Ref, UpdateOrderBody } from '../../../schemas/order-v2.js'
import type { ApiApp } from '../../api-app.js'
import { jsonObjectBody, MERGE_PATCH_MEDIA_TYPE, METADATA_BODY_LIMIT } from '../../strict-body.js'
import { operation } from '../operation.js'
import { answerOrderWrite, conditionalOrderWrite, INVALID_CONDITIONS, PRECONDITION_FAILED } from './order-write.js'

/**
 * updateOrder: a JSON Merge Patch of one order, by the rule both stores share (domain/order-patch.ts),
 * answered as every write to an order is (`answerOrderWrite`). A patch that changes nothing is
 * answered with the order as it is: nothing is written, no event, the version stays.
 */
export function updateOrderRoute(app: ApiApp): void {
  const { store, metrics } = app

  app.patch(
    '/store/orders/:orderId',
    {
      onRequest: app.requireScope('orders:write'),
      preValidation: jsonObjectBody,
      bodyLimit: METADATA_BODY_LIMIT,
      schema: {
        operationId: 'updateOrder',
        ...operation('orders', 'beta'),
        summary: 'Change an order',
        description:
          'Applies a JSON Merge Patch (RFC 7396) to the order and returns it: each member given replaces the order\'s, ' +
          '`null` removes it, and `metadata` is merged key by key (a key set to `null` is removed; keys not named stay). ' +
          '`petId`, `quantity` and `shipDate` change only while the order is `pending` (409 `order_not_pending` after); ' +
          '`metadata` changes in any state. Any other member is 400, and so is a bad value, naming it. The 200 is sent ' +
          'once the change is durable, with its `order.updated` event in the feed (its `previous` holds the values it ' +
          'replaced); the order\'s `version` is one more. A patch that changes nothing writes nothing and keeps the ' +
          'version. Send the `ETag` you read in `If-Match` so that a change made meanwhile by someone else is not ' +
          'overwritten: 412 `precondition_failed` then, and nothing changes. Without it, concurrent patches are applied ' +
          'one after the other: none is lost. Send `application/merge-patch+json` (or `application/json`). Requires the ' +
          '`orders:write` scope; a key without `orders:read` too is answered 204 with no body instead of 200 with the order.',
        consumes: [MERGE_PATCH_MEDIA_TYPE, 'application/json'],
        headers: WriteConditionHeaders,
        params: OrderIdV2Params,
        querystring: NoQuery,
        body: UpdateOrderBody,
        response: {
          200: { ...OrderV2Ref, description: 'The order as it now stands (as it was, for a patch that changes nothing)' },
          204: { type: 'null', description: 'The patch is applied; the key lacks `orders:read`, so the order is not shown' },
          ...errorResponses({
            400:
              '`orderId` is not a decimal integer in the int64 range (`invalid_order_id`); the body is missing, is not a JSON ' +
              'object, has a member other than `petId`, `quantity`, `shipDate` and `metadata`, or a bad value, or would give ' +
              'the order more than 50 metadata keys (`invalid_body`, naming it); a query parameter was sent (`invalid_parameter`); ' +
              INVALID_CONDITIONS,
            403: 'The API key lacks the `orders:write` scope (`insufficient_scope`)',
            404: 'No order has this id (`order_not_found`)',
            409: 'The patch changes `petId`, `quantity` or `shipDate` of an order that has shipped or been cancelled (`order_not_pending`)',
            412: PRECONDITION_FAILED,
            415: 'The body is not JSON (`unsupported_media_type`): send it with `Content-Type: application/merge-patch+json` or `application/json`',
          }),
        },
      },
    },
    async (request, reply) => {
      const body = request.body as UpdateOrderBody | undefined
      if (body === undefined) {
        throw new ApiError('invalid_body', 'The body is required: a JSON object with the members to change ("petId", "quantity", "shipDate", "metadata"); {} changes nothing.')
      }
      const patch: OrderPatch = {}
      if (body.petId !== undefined) patch.petId = body.petId
      if (body.quantity !== undefined) patch.quantity = body.quantity
      if (body.shipDate !== undefined) patch.shipDate = body.shipDate
      if (body.metadata !== undefined) patch.metadata = body.metadata
      const { orderId } = request.params
      const update = conditionalOrderWrite(request, store, orderId, (expected) => store.orders.update({ id: orderId, patch, expected }))
      return answerOrderWrite(request, reply, update, (outcome) => metrics.updated(outcome), {
        not_pending: 'order_not_pending',
        too_many_keys: 'invalid_body',
      })
    },
  )
}
