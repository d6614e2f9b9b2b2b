import type { FastifyReply, FastifyRequest } from 'fastify'
import type { OrderV2Record, PreconditionFailed } from '../../../domain/orders.js'
import { ApiError, type ErrorCode } from '../../../errors.js'
import { toApiOrderV2, type OrderV2 } from '../../../schemas/order-v2.js'
import { etag, preconditionFailed } from '../../preconditions.js'

/** The outcomes of `Result` that carry no order, but for `not_found` and `precondition_failed`: each is refused with an error code of its own. */
type Refused<Result extends { outcome: string }> = Exclude<Result extends { order: OrderV2Record } ? never : Result['outcome'], 'not_found' | 'precondition_failed'>

/**
 * The answer to a v2 write to one order (cancel, ship, complete, update), all safe to retry: its
 * outcome is counted (`error` when it throws), an outcome without an order is refused with its error
 * code (or 404; 412 naming the current version for an If-Match that named another), and the order is
 * returned as it now stands, with its ETag, whether this request changed it or an earlier one did —
 * to a key that may read orders. A key without `orders:read` gets 204 and no body (the ETag still,
 * which names a version, not the order): writing to an order (or retrying) must not let it read that
 * order.
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
  if (result.outcome === 'precondition_failed') throw preconditionFailed((result as unknown as PreconditionFailed).version)
  const refusal = (refusals as Partial<Record<string, ErrorCode>>)[result.outcome]
  // A refusal with a message of its own says why in it (too many metadata keys, say).
  if (refusal !== undefined) throw new ApiError(refusal, (result as { message?: string }).message)
  if (result.order === undefined) throw new ApiError('order_not_found', 'No order has this id.')
  reply.header('etag', etag(result.order.version))
  if (!request.apiKey!.scopes.includes('orders:read')) return reply.code(204).send(null)
  return toApiOrderV2(result.order)
}

/** The 412 of every write to an order that takes If-Match, as its document describes it. */
export const PRECONDITION_FAILED =
  "The order is not at the version `If-Match` names (`precondition_failed`): the message and the `ETag` header name the current one; nothing changed"
