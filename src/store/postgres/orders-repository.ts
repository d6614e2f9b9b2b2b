import { keyLiveAfter } from '../../domain/idempotency.js'
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
import { StoreUnavailableError, type ImportProgress, type OrderPageJson, type OrdersRepository } from '../store.js'
import { CANCELS, COMPLETES, RowWrites, SHIPS, type CancelWrite, type RowWrite } from './row-writes.js'
import type { PostgresDatabase } from './database.js'
import { PostgresPlaces } from './places.js'
import { PostgresOrderUpdates } from './order-updates.js'
import { checkPatch, type UpdateRequest, type UpdateResult } from '../../domain/order-patch.js'
import { readOrderPageJson, readOrderV2 } from './order-pages.js'
import { importOrders } from './order-import.js'

/**
 * The JSON list, one order per line, in id order. Each order's JSON is stored in `orders.list_json`
 * (migration 2), so nothing is built per order on either side. One statement: one snapshot.
 */
const LIST_JSON_COPY = `COPY (SELECT list_json FROM orders WHERE status <> 'cancelled' ORDER BY id) TO STDOUT`

/**
 * At most `limit` expired Idempotency-Key records, oldest first through the expires_at index, by
 * ctid. A record a place is replacing right now is locked by it, and skipped rather than waited for.
 */
const PRUNE_IDEMPOTENCY_KEYS = `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM idempotency_keys WHERE expires_at <= $1::timestamptz ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`

export class PostgresOrdersRepository implements OrdersRepository {
  private readonly cancels: RowWrites<CancelWrite, CancelResult>
  private readonly ships: RowWrites<RowWrite, ShipResult>
  private readonly completes: RowWrites<RowWrite, CompleteResult>
  private readonly places: PostgresPlaces
  private readonly updates: PostgresOrderUpdates
  private closing = false

  constructor(private readonly database: PostgresDatabase) {
    this.cancels = new RowWrites(database, CANCELS)
    this.ships = new RowWrites(database, SHIPS)
    this.completes = new RowWrites(database, COMPLETES)
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

  /** Group-committed with the cancels of the same moment (row-writes.ts). */
  cancel(id: bigint, cancelledByKey: bigint | null, reason: CancellationReason | null = null, expected?: ExpectedVersion): Promise<CancelResult> {
    return this.cancels.submit({ id, cancelledByKey, reason, expected })
  }

  /** Group-committed with the places of the same moment, or refused before (places.ts). */
  place(request: PlaceRequest): Promise<PlaceResult> {
    return this.closing ? closed() : this.places.submit(request)
  }

  /** Group-committed with the ships of the same moment (row-writes.ts). */
  ship(id: bigint, expected?: ExpectedVersion): Promise<ShipResult> {
    return this.ships.submit({ id, expected })
  }

  /** Group-committed with the completes of the same moment (row-writes.ts). */
  complete(id: bigint, expected?: ExpectedVersion): Promise<CompleteResult> {
    return this.completes.submit({ id, expected })
  }

  /** Group-committed with the updates of the same moment (order-updates.ts). */
  update(request: UpdateRequest): Promise<UpdateResult> {
    if (this.closing) return closed()
    const refused = checkPatch(request)
    return refused === undefined ? this.updates.submit(request) : Promise.reject(new RangeError(refused))
  }

  async pruneIdempotencyKeys(now: Date, limit: number): Promise<number> {
    const result = await this.database.execute(PRUNE_IDEMPOTENCY_KEYS, [keyLiveAfter(now.toISOString()), limit])
    return result.rowCount ?? 0
  }

  import(records: AsyncIterable<OrderRecord>, onProgress?: ImportProgress): Promise<number> {
    return importOrders(this.database, records, onProgress)
  }

  /** Refuses new writes, and settles those in flight. */
  async close(): Promise<void> {
    this.closing = true
    await Promise.all([this.cancels.close(), this.ships.close(), this.completes.close(), this.places.drain(), this.updates.drain()])
  }
}

/** A place or an update once close() has begun (cancels, ships and completes: RowWrites.submit). */
const closed = (): Promise<never> => Promise.reject(new StoreUnavailableError('the store is closed'))
