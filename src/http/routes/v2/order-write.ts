import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ExpectedVersion, OrderV2Record, PreconditionFailed } from '../../../domain/orders.js'
import { ApiError, type ErrorCode } from '../../../errors.js'
import { toApiOrderV2, type OrderV2 } from '../../../schemas/order-v2.js'
import type { Store } from '../../../store/store.js'
import { conditionalWrite, etag, preconditionFailed } from '../../preconditions.js'

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
  if (result.outcome === 'precondition_failed') {
    const failed = result as unknown as PreconditionFailed & { message?: string }
    throw preconditionFailed(failed.version, failed.message)
  }
  const refusal = (refusals as Partial<Record<string, ErrorCode>>)[result.outcome]
  // A refusal with a message of its own says why in it (too many metadata keys, say).
  if (refusal !== undefined) throw new ApiError(refusal, (result as { message?: string }).message)
  if (result.order === undefined) throw new ApiError('order_not_found', 'No order has this id.')
  reply.header('etag', etag(result.order.version))
  if (!request.apiKey!.scopes.includes('orders:read')) return reply.code(204).send(null)
  return toApiOrderV2(result.order)
}

/**
 * A write to order `id` under the request's If-Match and If-None-Match (conditionalWrite), the
 * order's version read from the store where they need it.
 */
export function conditionalOrderWrite<Result extends { outcome: string }>(
  request: FastifyRequest,
  store: Store,
  id: bigint,
  write: (expected: ExpectedVersion) => Promise<Result>,
): ReturnType<typeof conditionalWrite<Result>> {
  return conditionalWrite(request.headers, () => store.orders.find(id).then((order) => order?.version), write)
}

/** What every write to an order says of its preconditions, as its document describes it. */
export const WRITE_CONDITIONS =
  "With `If-Match` (the order's `ETag`), only an order still at that version is changed; with `If-None-Match`, only one " +
  'not at it (`*`: none): 412 `precondition_failed` otherwise, nothing changed.'

/** The 400s of malformed preconditions, as every write's document lists them. */
export const INVALID_CONDITIONS =
  '`If-Match` or `If-None-Match` is not `*` or a list of ETags (`invalid_if_match`, `invalid_if_none_match`)'

/** The 412 of every write to an order, as its document describes it. */
export const PRECONDITION_FAILED =
  'The order is at a version `If-Match` does not name, or one `If-None-Match` names (`precondition_failed`): the message and the `ETag` header name the current one; nothing changed'
