import type { OrderEventsRepository } from '../store/order-events.js'
import { BatchPruner, type PrunerOptions } from './batch-pruner.js'

const DAY_MS = 86_400_000

export interface EventPrunerOptions extends PrunerOptions {
  retentionDays: number
}

/**
 * Retention of the order event feed (EVENTS_RETENTION_DAYS): every minute, the events older than
 * the retention are deleted, a batch per transaction (a batch deletes the oldest events).
 */
export class EventPruner extends BatchPruner {
  constructor(events: OrderEventsRepository, options: EventPrunerOptions) {
    const { retentionDays, ...timing } = options
    super({
      ...timing,
      deleteBatch: (now, limit) => events.prune(new Date(now - retentionDays * DAY_MS), limit),
      messages: { pruned: 'order events pruned', failed: 'pruning order events failed; the next pass tries again' },
      fields: { retentionDays },
    })
  }
}
