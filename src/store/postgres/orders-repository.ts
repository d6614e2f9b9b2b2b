import type { OrderPageQuery } from '../../domain/order-pages.js'
import {
  type CancellationReason,
  type CancelResult,
  type CompleteResult,
  type ExpectedVersion,
  type OrderRecord,
  type OrderV2Record,
  type PlaceRequest,
  type PlaceResult,
  type ShipResult,
} from '../../domain/orders.js'
import { CANCEL, COMPLETE, SHIP, type OrderWriteRule } from '../../domain/order-writes.js'
import { StoreUnavailableError, type ImportProgress, type OrderPageJson, type OrdersRepository } from '../store.js'
import { RowWriteBatcher, type BatchOutcome } from './row-write-batcher.js'
import type { PostgresDatabase } from './database.js'
import { PostgresPlaces } from './places.js'
import { PostgresOrderUpdates } from './order-updates.js'
import { checkPatch, type UpdateRequest, type UpdateResult } from '../../domain/order-patch.js'
import { toOrderV2Record, type OrderV2Row } from '../rows.js'
import { ORDER_V2_JSON, orderV2Columns, readOrderPageJson, readOrderV2 } from './order-pages.js'
import { intArray, textArray } from './parameters.js'
import { importOrders } from './order-import.js'
import { bumpVersion, changedOrders, recordEvents, traceArrays, WRITE_TIME, type Traced } from './write-sql.js'
import type { OrderEventType } from '../../domain/order-events.js'
import { activeTraceContext, type TraceContext } from '../../trace-context.js'

/**
 * The JSON list, one order per line, in id order. Each order's JSON is stored in `orders.list_json`
 * (migration 2), so nothing is built per order on either side. One statement: one snapshot.
 */
const LIST_JSON_COPY = `COPY (SELECT list_json FROM orders WHERE status <> 'cancelled' ORDER BY id) TO STDOUT`

// An order as v2 shows it (order-pages.ts), qualified by `o` so that an UPDATE … FROM can RETURN it;
// a changed one also with its v2 JSON and its request's (`t`) trace context, for its event.
const ORDER_COLUMNS = orderV2Columns('o')
const CHANGED_ORDER_COLUMNS = `${ORDER_COLUMNS}, ${ORDER_V2_JSON} AS json, t.traceparent, t.tracestate`

/**
 * One kind of write to single orders (a cancel, a ship, a complete) as SQL: the requests' parameter
 * arrays (`request`, unnested into `columns`, the first `order_id`: not `id`, which the order's columns name;
 * then `if_match`, the version the write requires (NULL: any); the last two `traceparent, tracestate`,
 * traceArrays), what the write changes (`set`, which reads the request as `t`; the version moves on
 * too), what the order (`o`) must be for it to change (`when`), and its event.
 */
interface RowWriteSql {
  request: string
  columns: string
  set: string
  when: string
  type: OrderEventType
}

/**
 * `batch`: the writes of distinct orders in one statement (one transaction). Rows another transaction
 * holds locked are skipped, not waited for: a batch never waits for an order's lock while holding
 * others' (no deadlock with a concurrent import or another instance's batch, and one slow lock does
 * not hold up the whole batch); those orders are written one by one afterwards (`single`). The version
 * is bumped once, if anything changed. Every sub-statement sees the statement's snapshot. It returns a
 * row per order it changed (`changed`, the row as the UPDATE left it, with the version if bumped) and
 * a row per other requested order as the snapshot had it: the orders v2 answers with, in the same
 * round trip. Of those, one that could still take the write was locked (or changed since).
 *
 * `single`: one write on its own, waiting for the order's lock. The conditional update, its version
 * bump and its event are one statement, hence one transaction: the bump happens exactly when the
 * order changed. It returns the order it changed; a miss is read by a separate statement, whose fresh
 * snapshot sees whatever change made the update miss.
 */
function rowWriteStatements({ request, columns, set, when: state, type }: RowWriteSql): { batch: string; single: string } {
  const when = `${state} AND (t.if_match IS NULL OR o.version = t.if_match)`
  const recorded = `bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  ), recorded AS (
    ${recordEvents(changedOrders(type))}
  )`
  const update = `UPDATE orders o SET ${set}, version = o.version + 1`
  return {
    batch: `WITH request AS (
      SELECT * FROM ${request} AS r(${columns})
    ), target AS (
      SELECT t.* FROM orders o JOIN request t ON t.order_id = o.id WHERE ${when} ORDER BY o.id FOR UPDATE OF o SKIP LOCKED
    ), changed AS (
      ${update} FROM target t WHERE o.id = t.order_id AND ${when} RETURNING ${CHANGED_ORDER_COLUMNS}
    ), ${recorded}
    SELECT true AS changed, changed.*, (SELECT version FROM bumped) AS data_version FROM changed
    UNION ALL
    SELECT false, ${ORDER_COLUMNS}, NULL, NULL, NULL, NULL FROM orders o JOIN request t ON t.order_id = o.id
    WHERE NOT (${when}) OR o.id NOT IN (SELECT id FROM changed)`,
    single: `WITH changed AS (
      ${update} FROM ${request} AS t(${columns}) WHERE o.id = t.order_id AND ${when} RETURNING ${CHANGED_ORDER_COLUMNS}
    ), ${recorded}
    SELECT changed.*, (SELECT version FROM bumped) AS data_version FROM changed`,
  }
}
const IDS = { request: 'unnest($1::bigint[], $2::integer[], $3::text[], $4::text[])', columns: 'order_id, if_match, traceparent, tracestate' }
const CANCELS = rowWriteStatements({
  request: 'unnest($1::bigint[], $2::integer[], $3::bigint[], $4::text[], $5::text[], $6::text[])',
  columns: 'order_id, if_match, cancelled_by_key, reason, traceparent, tracestate',
  set: `status = 'cancelled', cancelled_at = ${WRITE_TIME}, cancelled_by_key = t.cancelled_by_key, cancellation_reason = t.reason`,
  when: `o.status = 'pending'`,
  type: 'order.cancelled',
})
const SHIPS = rowWriteStatements({ ...IDS, set: `status = 'shipped', shipped_at = ${WRITE_TIME}`, when: `o.status = 'pending'`, type: 'order.shipped' })
const COMPLETES = rowWriteStatements({
  ...IDS,
  set: `complete = true, completed_at = ${WRITE_TIME}`,
  when: `o.status = 'shipped' AND NOT o.complete`,
  type: 'order.completed',
})
/** The If-Match versions of a batch, NULL for the whole array when no write has one (as traceArrays). */
const expectedArray = (requests: readonly { expected: ExpectedVersion }[]): string | null =>
  requests.some((r) => r.expected !== undefined) ? intArray(requests.map((r) => r.expected ?? null)) : null
const idParams = (requests: Traced<Conditional<{ id: bigint }>>[]): unknown[] => [
  intArray(requests.map((r) => r.id)),
  expectedArray(requests),
  ...traceArrays(requests),
]

/**
 * At most `limit` expired Idempotency-Key records, oldest first through the expires_at index, by
 * ctid. A record a place is replacing right now is locked by it, and skipped rather than waited for.
 */
const PRUNE_IDEMPOTENCY_KEYS = `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM idempotency_keys WHERE expires_at <= $1::timestamptz ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`

/** A write to one order, and the version it requires (If-Match; undefined: any). */
type Conditional<Request> = Request & { expected: ExpectedVersion }
/** What a single write returns: the order it changed, and data_version if it bumped it. */
type ChangedRow = OrderV2Row & { data_version: bigint | null }
/** What a batch returns: the orders it changed, and the others as they were. */
type BatchRow = ChangedRow & { changed: boolean }

type CancelRequest = Traced<
  Conditional<{
    id: bigint
    cancelledByKey: bigint | null
    reason: CancellationReason | null
  }>
>
type IdRequest = Traced<Conditional<{ id: bigint }>>

export class PostgresOrdersRepository implements OrdersRepository {
  private readonly cancels: RowWriteBatcher<CancelRequest, CancelResult>
  private readonly ships: RowWriteBatcher<IdRequest, ShipResult>
  private readonly completes: RowWriteBatcher<IdRequest, CompleteResult>
  private readonly places: PostgresPlaces
  private readonly updates: PostgresOrderUpdates
  private closing = false

  constructor(private readonly database: PostgresDatabase) {
    this.cancels = this.rowWrites(CANCEL, CANCELS, (requests: CancelRequest[]) => [
      intArray(requests.map((r) => r.id)),
      expectedArray(requests),
      intArray(requests.map((r) => r.cancelledByKey)),
      textArray(requests.map((r) => r.reason)),
      ...traceArrays(requests),
    ])
    this.ships = this.rowWrites(SHIP, SHIPS, idParams)
    this.completes = this.rowWrites(COMPLETE, COMPLETES, idParams)
    this.places = new PostgresPlaces(database)
    this.updates = new PostgresOrderUpdates(database)
  }

  pageJson(query: OrderPageQuery): Promise<OrderPageJson> {
    return readOrderPageJson((sql, params) => this.database.read(sql, params), query)
  }

  find(id: bigint): Promise<OrderV2Record | undefined> {
    return readOrderV2((sql, params) => this.database.read(sql, params), id)
  }

  async hasAny(): Promise<boolean> {
    const { rows } = await this.database.read<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM orders WHERE status <> 'cancelled') AS any`)
    return rows[0]!.any
  }

  /**
   * The list as JSON text built by PostgreSQL, streamed by `COPY (SELECT list_json …) TO STDOUT` on a
   * client of its own. A single statement reads a single snapshot. Rows come as the socket's bytes,
   * never decoded into strings (pages of 5,000 as text left ~80 MiB of dead strings for V8's old
   * generation per list: docs/benchmarks.md), with backpressure: pg-copy-streams stops reading the
   * socket while the consumer is behind. Each page is one socket read's worth of whole rows (about
   * 64 KiB), comma-joined (copy-lines.ts). A connection cannot leave a COPY half-read, so breaking out
   * discards it: PostgreSQL ends the statement when the socket closes.
   */
  async *streamJson(): AsyncGenerator<Buffer> {
    const { connection, pages, first } = await this.database.copyOut(LIST_JSON_COPY)
    let finished = false
    try {
      for (let page = first; page.done !== true; page = await pages.next()) yield page.value
      finished = true
    } catch (error) {
      throw this.database.toStoreError(error)
    } finally {
      if (finished) connection.release()
      else {
        await pages.return(undefined).catch(() => {})
        connection.discard()
      }
    }
  }

  /**
   * Served from memory while the version listener is up: stale by at most MAX_STALENESS_MS (1 s)
   * for changes made elsewhere, normally a few milliseconds (the NOTIFY of the change); never for
   * this instance's own changes. Read from the database (one round trip) whenever the listener is
   * down, so it fails with StoreUnavailableError while the database is. See version-watcher.ts.
   */
  dataVersion(): Promise<bigint> {
    return this.database.versions.current()
  }

  /** Group-committed with the cancels of the same moment (row-write-batcher.ts). */
  cancel(id: bigint, cancelledByKey: bigint | null, reason: CancellationReason | null = null, expected?: ExpectedVersion): Promise<CancelResult> {
    return this.queueWrite((trace) => this.cancels.submit({ id, cancelledByKey, reason, expected, trace }))
  }

  /** Group-committed with the places of the same moment, or refused before (places.ts). */
  place(request: PlaceRequest): Promise<PlaceResult> {
    return this.queueWrite((trace) => this.places.submit({ ...request, trace }))
  }

  /** Group-committed with the ships of the same moment (row-write-batcher.ts). */
  ship(id: bigint, expected?: ExpectedVersion): Promise<ShipResult> {
    return this.queueWrite((trace) => this.ships.submit({ id, expected, trace }))
  }

  /** Group-committed with the completes of the same moment (row-write-batcher.ts). */
  complete(id: bigint, expected?: ExpectedVersion): Promise<CompleteResult> {
    return this.queueWrite((trace) => this.completes.submit({ id, expected, trace }))
  }

  /** Group-committed with the updates of the same moment (order-updates.ts). */
  update(request: UpdateRequest): Promise<UpdateResult> {
    return this.queueWrite((trace) => {
      const refused = checkPatch(request)
      return refused === undefined ? this.updates.submit({ ...request, trace }) : Promise.reject(new RangeError(refused))
    })
  }

  /**
   * A write is refused once close() has begun. Else it is queued with the trace context active now,
   * while the request that submits it runs, for its event: its batch is committed outside it.
   */
  private queueWrite<Result>(write: (trace: TraceContext | undefined) => Promise<Result>): Promise<Result> {
    return this.closing ? Promise.reject(new StoreUnavailableError('the store is closed')) : write(activeTraceContext())
  }

  async pruneIdempotencyKeys(now: Date, limit: number): Promise<number> {
    const result = await this.database.execute(PRUNE_IDEMPOTENCY_KEYS, [now.toISOString(), limit])
    return result.rowCount ?? 0
  }

  import(records: AsyncIterable<OrderRecord>, onProgress?: ImportProgress): Promise<number> {
    return importOrders(this.database, records, onProgress)
  }

  /** Refuses new writes, and settles those in flight. */
  async close(): Promise<void> {
    this.closing = true
    await Promise.all([this.cancels.drain(), this.ships.drain(), this.completes.drain(), this.places.drain(), this.updates.drain()])
  }

  /** Group commit for one kind of write (row-write-batcher.ts): its batches, and its writes on their own. */
  private rowWrites<Request extends Conditional<{ id: bigint }>, Result>(
    rule: OrderWriteRule<Result>,
    statements: { batch: string; single: string },
    params: (requests: Request[]) => unknown[],
  ): RowWriteBatcher<Request, Result> {
    return new RowWriteBatcher({
      commitBatch: (requests) => this.commitBatch(rule, statements.batch, params(requests), requests),
      writeOne: (request) => this.writeOne(rule, statements.single, params([request]), request),
      notFound: rule.missed(undefined)!, // the answer for an unknown order
      repeated: rule.repeated,
    })
  }

  /** One batch of writes of distinct orders; resolves once committed. Not retried on a lost connection: the commit may have happened. */
  private async commitBatch<Result>(
    rule: OrderWriteRule<Result>,
    statement: string,
    params: unknown[],
    requests: Conditional<{ id: bigint }>[],
  ): Promise<Map<bigint, BatchOutcome<Result>>> {
    const { rows } = await this.database.execute<BatchRow>(statement, params)
    const expected = new Map(requests.map((request) => [request.id, request.expected]))
    const results = new Map<bigint, BatchOutcome<Result>>()
    for (const row of rows) {
      if (row.changed) {
        if (row.data_version !== null) this.database.versions.observe(row.data_version)
        results.set(row.id, rule.changed(toOrderV2Record(row)))
      } else {
        results.set(row.id, rule.missed(toOrderV2Record(row), expected.get(row.id)) ?? 'locked')
      }
    }
    // Any other order is unknown: not found.
    return results
  }

  /** One write in its own transaction, waiting for the order's row lock if another holds it. Never retried on a lost connection: it may have committed. */
  private async writeOne<Result>(rule: OrderWriteRule<Result>, statement: string, params: unknown[], request: Conditional<{ id: bigint }>): Promise<Result> {
    for (;;) {
      const { rows } = await this.database.execute<ChangedRow>(statement, params)
      const changed = rows[0]
      if (changed !== undefined) {
        if (changed.data_version !== null) this.database.versions.observe(changed.data_version)
        return rule.changed(toOrderV2Record(changed))
      }
      const answer = rule.missed(await this.find(request.id), request.expected)
      if (answer !== undefined) return answer
      // It can take the write after all: placed or imported after the update's snapshot. Its turn now.
    }
  }
}
