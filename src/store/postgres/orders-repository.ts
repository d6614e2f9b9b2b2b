import { setTimeout as sleep } from 'node:timers/promises'
import type { CancellationReason, OrderPageQuery, OrderV2Record } from '../../domain/order-pages.js'
import { INT64_MAX, INT64_MIN } from '../../domain/int64.js'
import type { CancelResult, CompleteResult, OrderRecord, OrderStatus, PlaceRequest, PlaceResult, ShipResult } from '../../domain/orders.js'
import { StoreUnavailableError, type ImportProgress, type OrderPageJson, type OrdersRepository } from '../store.js'
import { RowWriteBatcher, type BatchOutcome } from './row-write-batcher.js'
import type { PostgresDatabase } from './database.js'
import { PlaceBatcher } from './place-batcher.js'
import { mustRetryPlaces, placeInTransaction } from './place-orders.js'
import { ORDER_V2_JSON, orderV2Columns, readOrderPageJson, readOrderV2, toOrderV2Record, type OrderV2Row } from './order-pages.js'
import { int8, intArray, textArray } from './import.js'
import { importOrders } from './order-import.js'
import { bumpVersion, changedOrders, recordEvents, WRITE_TIME } from './write-sql.js'
import type { OrderEventType } from '../order-events.js'

/**
 * The JSON list, one order per line, in id order. Each order's JSON is stored in `orders.list_json`
 * (migration 2), so nothing is built per order on either side. One statement: one snapshot.
 */
const LIST_JSON_COPY = `COPY (SELECT list_json FROM orders WHERE status <> 'cancelled' ORDER BY id) TO STDOUT`

// An order as v2 shows it (order-pages.ts), qualified by `o` so that an UPDATE … FROM can RETURN it;
// a changed one also with its v2 JSON, for its event.
const ORDER_COLUMNS = orderV2Columns('o')
const CHANGED_ORDER_COLUMNS = `${ORDER_COLUMNS}, ${ORDER_V2_JSON} AS json`

// One cancel on its own (an order another transaction held locked when its batch ran; see
// row-write-batcher.ts). The conditional update and the version bump are one statement, hence one
// transaction: the bump happens exactly when the order changed. It returns the order it cancelled;
// an order that did not change is read by a separate statement, whose fresh snapshot sees whatever
// change made the update miss.
const CANCEL = `WITH changed AS (
    UPDATE orders o SET status = 'cancelled', cancelled_at = ${WRITE_TIME}, cancelled_by_key = $2, cancellation_reason = $3
    WHERE o.id = $1 AND o.status = 'pending' RETURNING ${CHANGED_ORDER_COLUMNS}
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  ), recorded AS (
    ${recordEvents(changedOrders('order.cancelled'))}
  )
  SELECT changed.*, (SELECT version FROM bumped) AS version FROM changed`
/**
 * A batch of cancels, distinct orders, in one statement (one transaction). Rows another transaction
 * holds locked are skipped, not waited for: a batch never waits for an order's lock while holding
 * others' (no deadlock with a concurrent import or another instance's batch, and one slow lock does
 * not hold up the whole batch); those orders are cancelled one by one afterwards. The version is
 * bumped once, if anything was cancelled. Every sub-statement sees the statement's snapshot: the
 * orders then shipped are final; those then pending and not cancelled here were locked (or changed
 * since), and are the ones cancelled one by one.
 *
 * It returns a row per order it cancelled (`found` = 'changed', the row as the UPDATE left it) and a
 * row per other requested order of the snapshot (`found` = its status then; those then cancelled are
 * final, so the snapshot's row is the order as it stands): one row per known order, the orders v2
 * answers with, in the same round trip. The version, when bumped, is on the 'changed' rows.
 */
const CANCEL_BATCH = `WITH request AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS r(id, cancelled_by_key, reason)
  ), target AS (
    SELECT o.id AS target_id, r.cancelled_by_key, r.reason FROM orders o JOIN request r ON r.id = o.id
    WHERE o.status = 'pending' ORDER BY o.id FOR UPDATE OF o SKIP LOCKED
  ), changed AS (
    UPDATE orders o SET status = 'cancelled', cancelled_at = ${WRITE_TIME}, cancelled_by_key = t.cancelled_by_key,
      cancellation_reason = t.reason
    FROM target t WHERE o.id = t.target_id AND o.status = 'pending' RETURNING ${CHANGED_ORDER_COLUMNS}
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  ), recorded AS (
    ${recordEvents(changedOrders('order.cancelled'))}
  )
  SELECT 'changed' AS found, changed.*, (SELECT version FROM bumped) AS version FROM changed
  UNION ALL
  SELECT o.status, ${ORDER_COLUMNS}, NULL, NULL FROM orders o JOIN request r ON r.id = o.id
  WHERE o.status <> 'pending' OR o.id NOT IN (SELECT id FROM changed)`
/**
 * A batch of ships or completes (`set` where `when` holds), distinct orders, in one statement, as
 * CANCEL_BATCH is for cancels: rows another transaction holds locked are skipped, and written one by
 * one afterwards. It returns a row per order it changed (`found` = 'changed') and a row per other
 * requested order of the snapshot (`found` = 'complete' for a complete order, else its status).
 */
function updateBatch(set: string, when: string, type: OrderEventType): string {
  return `WITH request AS (
    SELECT * FROM unnest($1::bigint[]) AS r(id)
  ), target AS (
    SELECT o.id AS target_id FROM orders o JOIN request r ON r.id = o.id WHERE ${when} ORDER BY o.id FOR UPDATE OF o SKIP LOCKED
  ), changed AS (
    UPDATE orders o SET ${set} FROM target t WHERE o.id = t.target_id AND ${when} RETURNING ${CHANGED_ORDER_COLUMNS}
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  ), recorded AS (
    ${recordEvents(changedOrders(type))}
  )
  SELECT 'changed' AS found, changed.*, (SELECT version FROM bumped) AS version FROM changed
  UNION ALL
  SELECT CASE WHEN o.complete THEN 'complete' ELSE o.status END, ${ORDER_COLUMNS}, NULL, NULL FROM orders o JOIN request r ON r.id = o.id
  WHERE NOT (${when}) OR o.id NOT IN (SELECT id FROM changed)`
}
const SHIPPABLE = `o.status = 'pending'`
const SHIP_SET = `status = 'shipped', shipped_at = ${WRITE_TIME}`
const SHIP_BATCH = updateBatch(SHIP_SET, SHIPPABLE, 'order.shipped')
const COMPLETABLE = `o.status = 'shipped' AND NOT o.complete`
const COMPLETE_SET = `complete = true, completed_at = ${WRITE_TIME}`
const COMPLETE_BATCH = updateBatch(COMPLETE_SET, COMPLETABLE, 'order.completed')

// One ship or complete on its own (an order another transaction held locked when its batch ran): one
// conditional update with the version bump and the event in the same statement (one transaction),
// returning the order it changed. A miss is read by a separate statement, whose fresh snapshot sees
// whatever change made the update miss.
const SHIP = `WITH changed AS (
    UPDATE orders o SET ${SHIP_SET} WHERE o.id = $1 AND ${SHIPPABLE} RETURNING ${CHANGED_ORDER_COLUMNS}
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  ), recorded AS (
    ${recordEvents(changedOrders('order.shipped'))}
  )
  SELECT changed.*, (SELECT version FROM bumped) AS version FROM changed`
const COMPLETE = `WITH changed AS (
    UPDATE orders o SET ${COMPLETE_SET} WHERE o.id = $1 AND ${COMPLETABLE} RETURNING ${CHANGED_ORDER_COLUMNS}
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  ), recorded AS (
    ${recordEvents(changedOrders('order.completed'))}
  )
  SELECT changed.*, (SELECT version FROM bumped) AS version FROM changed`

/**
 * At most `limit` expired Idempotency-Key records, oldest first through the expires_at index, by
 * ctid. A record a place is replacing right now is locked by it, and skipped rather than waited for.
 */
const PRUNE_IDEMPOTENCY_KEYS = `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM idempotency_keys WHERE expires_at <= $1::timestamptz ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`

/** A place batch that met an import's new ids is tried again this many times, after these pauses. */
const PLACE_ATTEMPTS = 100
const PLACE_RETRY_MS = { first: 10, max: 250 }
/** toISOString()'s form, years 0001–9999 (PostgreSQL has no year 0). */
const SHIP_DATE = /^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** What one ship or complete statement returns: the order it changed. */
type ChangedRow = OrderV2Row & { version: bigint | null }
/** What a batch of ships or completes returns: the orders it changed, and the others as they were. */
type BatchRow = ChangedRow & { found: 'changed' | 'complete' | OrderStatus }

interface CancelRequest {
  id: bigint
  cancelledByKey: bigint | null
  reason: CancellationReason | null
}

export class PostgresOrdersRepository implements OrdersRepository {
  private readonly cancels: RowWriteBatcher<CancelRequest, CancelResult>
  private readonly ships: RowWriteBatcher<{ id: bigint }, ShipResult>
  private readonly completes: RowWriteBatcher<{ id: bigint }, CompleteResult>
  private readonly places: PlaceBatcher
  private closing = false

  constructor(private readonly database: PostgresDatabase) {
    this.cancels = new RowWriteBatcher({
      commitBatch: (requests) => this.commitCancels(requests),
      writeOne: (request) => this.cancelAlone(request),
      notFound: { outcome: 'not_found' },
      repeated: (first) => (first.outcome === 'cancelled' ? { ...first, outcome: 'already_cancelled' } : first),
    })
    this.ships = new RowWriteBatcher({
      commitBatch: (requests) => this.commitShips(requests),
      writeOne: ({ id }) => this.shipAlone(id),
      notFound: { outcome: 'not_found' },
      repeated: (first) => (first.outcome === 'shipped' ? { ...first, outcome: 'already_shipped' } : first),
    })
    this.completes = new RowWriteBatcher({
      commitBatch: (requests) => this.commitCompletes(requests),
      writeOne: ({ id }) => this.completeAlone(id),
      notFound: { outcome: 'not_found' },
      repeated: (first) => (first.outcome === 'completed' ? { ...first, outcome: 'already_complete' } : first),
    })
    this.places = new PlaceBatcher((requests) => this.commitPlaces(requests))
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
    const { lease, pages, first } = await this.database.copyOut(LIST_JSON_COPY)
    let finished = false
    try {
      for (let page = first; page.done !== true; page = await pages.next()) yield page.value
      finished = true
    } catch (error) {
      throw this.database.toStoreError(error)
    } finally {
      if (finished) lease.release()
      else {
        await pages.return(undefined).catch(() => {})
        lease.discard()
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
  cancel(id: bigint, cancelledByKey: bigint | null, reason: CancellationReason | null = null): Promise<CancelResult> {
    if (this.closing) return Promise.reject(new StoreUnavailableError('the store is closed'))
    return this.cancels.write({ id, cancelledByKey, reason })
  }

  /**
   * Group-committed with the places of the same moment (place-batcher.ts, place-orders.ts). A
   * request a statement would refuse is refused here, before it joins a batch it would fail.
   */
  place(request: PlaceRequest): Promise<PlaceResult> {
    if (this.closing) return Promise.reject(new StoreUnavailableError('the store is closed'))
    const { petId, quantity, shipDate } = request.order
    if (petId < INT64_MIN || petId > INT64_MAX) return Promise.reject(new RangeError(`petId ${petId} is not an int64`))
    if (!Number.isSafeInteger(quantity) || quantity < 1 || quantity > 2 ** 31 - 1) {
      return Promise.reject(new RangeError(`quantity ${quantity} is not a positive int32`))
    }
    if (shipDate !== null && !SHIP_DATE.test(shipDate)) return Promise.reject(new RangeError(`shipDate ${shipDate} is not as toISOString() writes it`))
    return this.places.place(request)
  }

  /** Group-committed with the ships of the same moment (row-write-batcher.ts). */
  ship(id: bigint): Promise<ShipResult> {
    if (this.closing) return Promise.reject(new StoreUnavailableError('the store is closed'))
    return this.ships.write({ id })
  }

  /** Group-committed with the completes of the same moment (row-write-batcher.ts). */
  complete(id: bigint): Promise<CompleteResult> {
    if (this.closing) return Promise.reject(new StoreUnavailableError('the store is closed'))
    return this.completes.write({ id })
  }

  /** One ship in its own transaction, waiting for the order's row lock if another holds it. */
  private async shipAlone(id: bigint): Promise<ShipResult> {
    for (;;) {
      const changed = await this.changeOne(SHIP, id)
      if (changed !== undefined) return { outcome: 'shipped', order: changed }
      const order = await this.find(id)
      if (order === undefined) return { outcome: 'not_found' }
      if (order.status === 'cancelled') return { outcome: 'cancelled' }
      if (order.status === 'shipped') return { outcome: 'already_shipped', order }
      // Pending: placed or imported after the update's snapshot. Its turn now.
    }
  }

  /** One complete in its own transaction, waiting for the order's row lock if another holds it. */
  private async completeAlone(id: bigint): Promise<CompleteResult> {
    for (;;) {
      const changed = await this.changeOne(COMPLETE, id)
      if (changed !== undefined) return { outcome: 'completed', order: changed }
      const order = await this.find(id)
      if (order === undefined) return { outcome: 'not_found' }
      if (order.status === 'cancelled') return { outcome: 'cancelled' }
      if (order.status === 'pending') return { outcome: 'not_shipped' }
      if (order.complete) return { outcome: 'already_complete', order }
      // Shipped and not complete: changed after the update's snapshot (an import). Its turn now.
    }
  }

  async pruneIdempotencyKeys(now: Date, limit: number): Promise<number> {
    const result = await this.database.write(PRUNE_IDEMPOTENCY_KEYS, [now.toISOString(), limit])
    return result.rowCount ?? 0
  }

  import(records: AsyncIterable<OrderRecord>, onProgress?: ImportProgress): Promise<number> {
    return importOrders(this.database, records, onProgress)
  }

  /** Refuses new writes, and settles those in flight. */
  async close(): Promise<void> {
    this.closing = true
    await Promise.all([this.cancels.drain(), this.ships.drain(), this.completes.drain(), this.places.drain()])
  }

  /** One batch of ships of distinct orders (SHIP_BATCH); resolves once committed. */
  private async commitShips(requests: { id: bigint }[]): Promise<Map<bigint, BatchOutcome<ShipResult>>> {
    return this.commitUpdates(SHIP_BATCH, requests, (row) => {
      if (row.found === 'changed') return { outcome: 'shipped', order: toOrderV2Record(row) }
      if (row.found === 'pending') return 'locked'
      return row.found === 'cancelled' ? { outcome: 'cancelled' } : { outcome: 'already_shipped', order: toOrderV2Record(row) }
    })
  }

  /** One batch of completes of distinct orders (COMPLETE_BATCH); resolves once committed. */
  private async commitCompletes(requests: { id: bigint }[]): Promise<Map<bigint, BatchOutcome<CompleteResult>>> {
    return this.commitUpdates(COMPLETE_BATCH, requests, (row) => {
      if (row.found === 'changed') return { outcome: 'completed', order: toOrderV2Record(row) }
      if (row.found === 'complete') return { outcome: 'already_complete', order: toOrderV2Record(row) }
      // Shipped, not complete, and not completed by the batch: locked (or changed since).
      if (row.found === 'shipped') return 'locked'
      return row.found === 'cancelled' ? { outcome: 'cancelled' } : { outcome: 'not_shipped' }
    })
  }

  /** A batch of SHIP_BATCH or COMPLETE_BATCH: each order's outcome, from its changed row or its snapshot's. */
  private async commitUpdates<Result>(
    statement: string,
    requests: { id: bigint }[],
    outcome: (row: BatchRow) => BatchOutcome<Result>,
  ): Promise<Map<bigint, BatchOutcome<Result>>> {
    // Not retried on a lost connection: the commit may have happened.
    const { rows } = await this.database.write<BatchRow>(statement, [intArray(requests.map((r) => r.id))])
    const results = new Map<bigint, BatchOutcome<Result>>()
    for (const row of rows) {
      if (row.found === 'changed' && row.version !== null) this.database.versions.observe(row.version)
      results.set(row.id, outcome(row)) // one row per known order
    }
    // Any other order is unknown: not found.
    return results
  }

  /** SHIP or COMPLETE: the order it changed, or undefined when the update missed. Never retried: it may have committed. */
  private async changeOne(statement: string, id: bigint): Promise<OrderV2Record | undefined> {
    const { rows } = await this.database.write<ChangedRow>(statement, [int8(id)])
    const changed = rows[0]
    if (changed === undefined) return undefined
    if (changed.version !== null) this.database.versions.observe(changed.version)
    return toOrderV2Record(changed)
  }

  /**
   * One batch of places in one transaction (place-orders.ts); resolves once committed. A batch whose
   * new ids an import took meanwhile rolled back, and is tried again in a new transaction once the
   * import has had time to commit. Not retried on a lost connection: the commit may have happened.
   */
  private async commitPlaces(requests: PlaceRequest[]): Promise<PlaceResult[]> {
    for (let attempt = 1, pause = PLACE_RETRY_MS.first; ; attempt++, pause = Math.min(pause * 2, PLACE_RETRY_MS.max)) {
      try {
        const { results, version } = await this.database.transaction((lease) => placeInTransaction(lease, requests, new Date()))
        // Only once committed: a version that never committed must not label a list.
        if (version !== undefined) this.database.versions.observe(version)
        return results
      } catch (error) {
        if (!mustRetryPlaces(error) || attempt >= PLACE_ATTEMPTS) throw error
        await sleep(pause)
      }
    }
  }

  /** One batch of cancels of distinct orders (CANCEL_BATCH); resolves once committed. */
  private async commitCancels(requests: CancelRequest[]): Promise<Map<bigint, BatchOutcome<CancelResult>>> {
    // Not retried on a lost connection: the commit may have happened.
    const { rows } = await this.database.write<OrderV2Row & { found: 'changed' | OrderStatus; version: bigint | null }>(CANCEL_BATCH, [
      intArray(requests.map((r) => r.id)),
      intArray(requests.map((r) => r.cancelledByKey)),
      textArray(requests.map((r) => r.reason)),
    ])
    const results = new Map<bigint, BatchOutcome<CancelResult>>()
    for (const row of rows) {
      if (row.found === 'changed') {
        if (row.version !== null) this.database.versions.observe(row.version)
        results.set(row.id, { outcome: 'cancelled', order: toOrderV2Record(row) })
      } else if (results.get(row.id) === undefined) {
        // The snapshot's pending orders not cancelled by this batch were locked (or changed since).
        results.set(
          row.id,
          row.found === 'pending'
            ? 'locked'
            : row.found === 'shipped'
              ? { outcome: 'already_shipped' }
              : { outcome: 'already_cancelled', order: toOrderV2Record(row) },
        )
      }
    }
    // Any other order is unknown: not found.
    return results
  }

  /** One cancel in its own transaction, waiting for the order's row lock if another holds it. */
  private async cancelAlone({ id, cancelledByKey, reason }: CancelRequest): Promise<CancelResult> {
    // Not retried on a lost connection: the commit may have happened.
    const { rows } = await this.database.write<OrderV2Row & { version: bigint | null }>(CANCEL, [int8(id), int8(cancelledByKey), reason])
    const changed = rows[0]
    if (changed !== undefined) {
      if (changed.version !== null) this.database.versions.observe(changed.version)
      return { outcome: 'cancelled', order: toOrderV2Record(changed) }
    }
    const order = await this.find(id)
    if (order?.status === 'cancelled') return { outcome: 'already_cancelled', order }
    // Unknown, or (imported since the update missed it) pending: not found.
    return { outcome: order?.status === 'shipped' ? 'already_shipped' : 'not_found' }
  }
}
