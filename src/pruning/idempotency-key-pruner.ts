import type { OrdersRepository } from '../store/store.js'
import { BatchPruner, type PrunerOptions } from './batch-pruner.js'

/**
 * placeOrder's Idempotency-Key records past their `expiresAt` (IDEMPOTENCY_KEY_TTL_HOURS after the
 * first request) are deleted every minute, a batch per transaction. Only storage depends on it: the
 * store ignores an expired record whether or not it has been deleted yet.
 */
export class IdempotencyKeyPruner extends BatchPruner {
  constructor(orders: Pick<OrdersRepository, 'pruneIdempotencyKeys'>, options: PrunerOptions) {
    super({
      ...options,
      deleteBatch: (now, limit) => orders.pruneIdempotencyKeys(new Date(now), limit),
      messages: { pruned: 'idempotency keys pruned', failed: 'pruning idempotency keys failed; the next pass tries again' },
    })
  }
}
