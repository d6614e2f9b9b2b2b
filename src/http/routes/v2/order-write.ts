import type { FastifyReply, FastifyRequest } from 'fastify'
import type { OrderV2Record } from '../../../domain/orders.js'
import { ApiError, type ErrorCode } from '../../../errors.js'
import { toApiOrderV2, type OrderV2 } from '../../../schemas/order-v2.js'

/** The outcomes of `Result` that carry no order, but for `not_found`: each is refused with an error code of its own. */
type Refused<Result extends { outcome: string }> = Exclude<Result extends { order: OrderV2Record } ? never : Result['outcome'], 'not_found'>

/**
 * The answer to a v2 write to one order (cancel, ship, complete), all safe to retry: its outcome is
 * counted (`error` when it throws), an outcome without an order is refused with its error code (or
 * 404), and the order is returned as it now stands, whether this request changed it or an earlier
 * one did — to a key that may read orders. A key without `orders:read` gets 204 and no body:
 * writing to an order (or retrying) must not let it read that order.
 */
export async function answerOrderWrite<Result extends { outcome: string; order?: OrderV2Record }>(
  request: FastifyRequest,
  reply: FastifyReply,
  write: Promise<Result>,
  count: (outcome: Result['outcome'] | 'error') => void,
  refusals: Record<Refused<Result>, ErrorCode>,
): Promise<OrderV2 | FastifyReply> {
  const result = await write.catch((error: unknown) => {
    count('error')
    throw error
  })
  count(result.outcome)
  const refusal = (refusals as Partial<Record<string, ErrorCode>>)[result.outcome]
  if (refusal !== undefined) throw new ApiError(refusal)
  if (result.order === undefined) throw new ApiError('order_not_found', 'No order has this id.')
  if (!request.apiKey!.scopes.includes('orders:read')) return reply.code(204).send(null)
  return toApiOrderV2(result.order)
}
