import type { OrderEventType } from '../../domain/order-events.js'
import type { TraceContext } from '../../trace-context.js'
import { utc } from './order-pages.js'
import { textArray } from './parameters.js'
import { VERSION_CHANNEL } from './version-watcher.js'

/**
 * Every bump of data_version: it returns the new version, and NOTIFYs it in the same transaction
 * (delivered at COMMIT) to every instance listening (see version-watcher.ts).
 */
export function bumpVersion(condition = ''): string {
  return `UPDATE data_version SET version = version + 1 WHERE id = 1${condition}
    RETURNING version, pg_notify('${VERSION_CHANNEL}', version::text)`
}

/**
 * The time of every write (cancelled_at, shipped_at, completed_at, an event's occurred_at): the
 * transaction's start, to the millisecond. SQLite stores `toISOString()` text, milliseconds too, and
 * v2 shows milliseconds: an instant stored finer would be shown truncated, so two reads of one change
 * could not be compared with what is stored.
 */
export const WRITE_TIME = `date_trunc('milliseconds', now())`

/**
 * The outbox (../order-events.ts): the events of `source`'s rows (order_id, type, json: the order's
 * v2 JSON after the change; traceparent and tracestate: the trace context of the write, NULL when
 * it had none; and when `previous` is given, the name of its column: an update's `previous` JSON),
 * in the statement's transaction, all at the transaction's time. Joined with
 * `bumped`, the data_version bump of the same statement, positions are taken only once the
 * transaction holds that row's lock, which it keeps until COMMIT: so positions are handed out in
 * commit order (docs/decisions.md).
 */
export function recordEvents(source: string, previous?: string): string {
  const tail = previous === undefined ? `'}'` : `',"previous":' || s.${previous} || '}'`
  return `INSERT INTO order_events (position, occurred_at, order_id, type, body, traceparent, tracestate)
    SELECT nextval('order_event_position'), ${WRITE_TIME}, s.order_id, s.type,
      '"type":"' || s.type || '","occurredAt":"' || (SELECT ${utc(WRITE_TIME)}) || '","order":' || s.json || ${tail},
      s.traceparent, s.tracestate
    FROM (${source}) AS s CROSS JOIN bumped`
}

/** `recordEvents`' source for the orders a statement's `changed` returned, with their requests' trace contexts. */
export const changedOrders = (type: OrderEventType): string =>
  `SELECT id AS order_id, '${type}' AS type, json, traceparent, tracestate FROM changed`

/**
 * A batch's trace contexts (each request's, as its group commit kept it: ../group-commit.ts), as two
 * text[] parameters parallel to its other arrays (traceparents, tracestates). NULL for both when no
 * write in it is traced, as when tracing is off: unnest() pads a NULL array with NULLs, so nothing is
 * built or sent per write.
 */
export function traceContextArrays(traces: readonly (TraceContext | undefined)[]): [string | null, string | null] {
  if (!traces.some((trace) => trace !== undefined)) return [null, null]
  return [textArray(traces.map((trace) => trace?.traceparent)), textArray(traces.map((trace) => trace?.tracestate))]
}
