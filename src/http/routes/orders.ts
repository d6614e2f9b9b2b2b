import { Readable } from 'node:stream'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { FastifyReply } from 'fastify'
import Type from 'typebox'
import { ApiError } from '../../errors.js'
import { OrderIdParams, OrderRef, type Order } from '../../schemas/order.js'
import { errorResponses } from '../../schemas/error.js'
import type { ApiApp } from '../api-app.js'

export function ordersRoutes(app: ApiApp): void {
  const { store, metrics } = app

  app.get(
    '/store/orders',
    {
      onRequest: app.requireScope('orders:read'),
      schema: {
        operationId: 'listOrders',
        tags: ['orders'],
        summary: 'List all orders',
        description:
          'Returns every order that has not been cancelled, in ascending `id` order, in one response. ' +
          'Filtering and pagination are not supported (planned for v2). Requires the `orders:read` scope.',
        security: [{ bearerAuth: [] }],
        'x-stability': 'stable',
        response: {
          200: Type.Array(OrderRef, { description: 'Every order that is not cancelled, ascending id' }),
          ...errorResponses({ 401: 'The API key is missing or invalid', 403: 'The API key lacks the orders:read scope' }),
        },
      },
    },
    async (_request, reply: FastifyReply) => {
      const serialize = reply.getSerializationFunction('200') as unknown as (orders: Order[]) => string
      const batches = store.streamOrders()[Symbol.asyncIterator]()
      // The first batch is read before the status line is sent, so a database failure is still a
      // proper 503 Error. After that, a failure can only cut the stream short.
      const first = await batches.next()
      return reply.type('application/json; charset=utf-8').send(Readable.from(jsonArray(first, batches, serialize)))
    },
  )

  app.delete(
    '/store/orders/:orderId',
    {
      onRequest: app.requireScope('orders:cancel'),
      schema: {
        operationId: 'cancelOrder',
        tags: ['orders'],
        summary: 'Cancel an order',
        description:
          'Cancels a pending order. An order that has shipped cannot be cancelled (409); an unknown or ' +
          'already cancelled order is 404. The 204 is sent only once the cancellation is durable. ' +
          'Requires the `orders:cancel` scope.',
        security: [{ bearerAuth: [] }],
        'x-stability': 'stable',
        params: OrderIdParams,
        response: {
          204: Type.Null({ description: 'Order cancelled; no body' }),
          ...errorResponses({
            400: 'orderId is not an int64 (code invalid_order_id)',
            401: 'The API key is missing or invalid',
            403: 'The API key lacks the orders:cancel scope',
            404: 'The order does not exist or is already cancelled (code order_not_found)',
            409: 'The order has already shipped (code order_already_shipped)',
          }),
        },
      },
    },
    async (request, reply) => {
      const outcome = await store.cancelOrder(request.params.orderId, request.apiKey!.id).catch((error: unknown) => {
        metrics.cancelled('error')
        throw error
      })
      metrics.cancelled(outcome)
      if (outcome === 'already_shipped') throw new ApiError('order_already_shipped')
      if (outcome === 'not_found') throw new ApiError('order_not_found')
      return reply.code(204).send(null)
    },
  )
}

/** `[`, each batch serialized by the route's own response serializer, `]` — yielding between batches. */
async function* jsonArray(
  first: IteratorResult<Order[]>,
  rest: AsyncIterator<Order[]>,
  serialize: (orders: Order[]) => string,
): AsyncGenerator<string> {
  let next = first
  let separator = ''
  yield '['
  try {
    while (next.done !== true) {
      yield separator + serialize(next.value).slice(1, -1)
      separator = ','
      await nextTurn() // let small requests run between batches
      next = await rest.next()
    }
  } finally {
    await rest.return?.() // the client went away or we finished: release the cursor now
  }
  yield ']'
}
