import { eventBody, toEventsPage, type OrderEventType, type OrderEventsPage } from '../../domain/order-events.js'
import type { TraceContext } from '../../trace-context.js'
import type { OrderEventsRepository } from '../order-events.js'
import { classified, statement, type SqliteDatabase } from './database.js'

// One statement, hence one snapshot: the page, and the bounds that judge `after`. The rows
// reach group_concat in position order from the ordered, limited subquery (a co-routine).
const READ = `
  SELECT CAST('[' || coalesce(group_concat('{"id":"' || position || '",' || body, ','), '') || ']' AS BLOB),
    count(*), max(position),
    (SELECT pruned_through FROM event_retention WHERE id = 1),
    (SELECT max(position) FROM order_events)
  FROM (SELECT position, body FROM order_events
        WHERE position > coalesce(?, (SELECT pruned_through FROM event_retention WHERE id = 1))
        ORDER BY position LIMIT ?)`

// Oldest first, and never past an event it keeps (one that occurred at or after the cutoff).
const PRUNE = `
  WITH batch AS (SELECT position, occurred_at FROM order_events ORDER BY position LIMIT ?)
  DELETE FROM order_events WHERE position IN (SELECT position FROM batch)
    AND position < coalesce((SELECT min(position) FROM batch WHERE occurred_at >= ?), 9223372036854775807)
  RETURNING position`

/** Run in the transaction of the change it records (orders-repository.ts's import, order-writes.ts), with `orderEvent()`'s values. */
export const INSERT_EVENT = 'INSERT INTO order_events (occurred_at, order_id, type, body, traceparent, tracestate) VALUES (?, ?, ?, ?, ?, ?)'

/**
 * INSERT_EVENT's parameters: the order's v2 JSON as it is after the change, at `occurredAt`
 * (toISOString form), the trace context of the write that made the change (none: NULL), and an
 * update's `previous` (order-patch.ts).
 */
export function orderEvent(
  type: OrderEventType,
  occurredAt: string,
  orderId: bigint,
  orderJson: string,
  trace?: TraceContext,
  previousJson?: string,
): [string, bigint, string, string, string | null, string | null] {
  return [occurredAt, orderId, type, eventBody(type, occurredAt, orderJson, previousJson), trace?.traceparent ?? null, trace?.tracestate ?? null]
}

export class SqliteOrderEventsRepository implements OrderEventsRepository {
  constructor(private readonly database: SqliteDatabase) {}

  async read(after: bigint | undefined, limit: number): Promise<OrderEventsPage> {
    const [json, count, last, prunedThrough, newest] = classified(
      () => statement(this.database.db, READ).raw(true).get(after ?? null, limit) as [Buffer, bigint, bigint | null, bigint, bigint | null],
    )
    return toEventsPage(after, { json, count: Number(count), last, prunedThrough, newest })
  }

  async prune(before: Date, batch = 1000): Promise<number> {
    const db = this.database.db
    return this.database.immediate(() => {
      const deleted = db.prepare(PRUNE).pluck().all(batch, before.toISOString()) as bigint[]
      if (deleted.length > 0) {
        const newest = deleted.reduce((a, b) => (a > b ? a : b))
        db.prepare('UPDATE event_retention SET pruned_through = max(pruned_through, ?) WHERE id = 1').run(newest)
      }
      return deleted.length
    })
  }
}
