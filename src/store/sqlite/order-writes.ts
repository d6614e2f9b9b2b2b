import type Database from 'better-sqlite3'
import { keyAnswer, PLACED_STATUS, type StoredKey } from '../../domain/idempotency.js'
import { metadataText } from '../../domain/order-metadata.js'
import { applyPatch, previousJson, type UpdateRequest, type UpdateResult } from '../../domain/order-patch.js'
import type {
  CancellationReason,
  CancelResult,
  CompleteResult,
  ExpectedVersion,
  NewOrder,
  OrderV2Record,
  PlaceRequest,
  PlaceResult,
  ShipResult,
} from '../../domain/orders.js'
import { placedId } from '../../domain/order-places.js'
import { CANCEL, COMPLETE, SHIP, type OrderWriteRule } from '../../domain/order-writes.js'
import { INSERT_EVENT, orderEvent } from './order-events-repository.js'
import { orderV2Json } from '../order-json.js'
import { orderStateAssignments, orderStateCondition } from '../order-state-sql.js'
import { toOrderV2Record, type OrderV2Row } from '../rows.js'
import { ORDER_V2_COLUMNS, ORDER_V2_JSON } from './order-pages.js'
import type { TraceContext } from '../../trace-context.js'

type ChangedRow = OrderV2Row & { json: string }

/** What a write sees of the batch it runs in. */
export interface Batch {
  /** The transaction's time, milliseconds, as toISOString() writes them (what PostgreSQL stores too). */
  readonly now: string
  /** Called by a write that changed an order: the batch then bumps the data version once. */
  changed(): void
}

/**
 * The API's writes to orders, each run inside a WriteBatcher's transaction on the batcher's own
 * connection: one conditional statement changes the order, and the order's event goes in with it,
 * with `trace`, the trace context of the request that submitted the write (the batch runs outside
 * it); what a write answers is ../../domain/order-writes.ts's. SQLite makes every change of an
 * UPDATE … RETURNING at its first step, which get() takes.
 */
/** The record of an Idempotency-Key (api_key_id, key), as StoredKey has it. */
export const FIND_KEY = `SELECT fingerprint, order_id AS orderId, response_status AS responseStatus, response_body AS responseBody, expires_at AS expiresAt
  FROM idempotency_keys WHERE api_key_id = ? AND key = ?`

export class OrderWrites {
  private readonly statements

  constructor(db: Database.Database) {
    const returning = `RETURNING ${ORDER_V2_COLUMNS}, ${ORDER_V2_JSON} AS json`
    this.statements = {
      find: db.prepare(`SELECT ${ORDER_V2_COLUMNS} FROM orders WHERE id = ?`),
      insertEvent: db.prepare(INSERT_EVENT),
      // Each also requires the version given (If-Match; NULL: any), and moves it on.
      cancel: db.prepare(
        `UPDATE orders SET ${to(CANCEL)}, cancelled_at = ?, cancelled_by_key = ?, cancellation_reason = ?, version = version + 1
         WHERE id = ? AND ${from(CANCEL)} AND coalesce(? = version, TRUE) ${returning}`,
      ),
      ship: db.prepare(`UPDATE orders SET ${to(SHIP)}, shipped_at = ?, version = version + 1 WHERE id = ? AND ${from(SHIP)} AND coalesce(? = version, TRUE) ${returning}`),
      complete: db.prepare(
        `UPDATE orders SET ${to(COMPLETE)}, completed_at = ?, version = version + 1 WHERE id = ? AND ${from(COMPLETE)} AND coalesce(? = version, TRUE) ${returning}`,
      ),
      update: db.prepare(`UPDATE orders SET pet_id = ?, quantity = ?, ship_date = ?, metadata = ?, version = ? WHERE id = ?`),
      // The rowid's B-tree gives its largest key at once; imported ids included.
      maxId: db.prepare('SELECT max(id) FROM orders').pluck(),
      insertOrder: db.prepare(`INSERT INTO orders (id, pet_id, quantity, ship_date, metadata, complete, status) VALUES (?, ?, ?, ?, ?, 0, 'pending')`),
      findKey: db.prepare(FIND_KEY),
      // Only an expired record is ever replaced: place() answers from an unexpired one first (keyAnswer).
      putKey: db.prepare(
        `INSERT INTO idempotency_keys (api_key_id, key, fingerprint, order_id, response_status, response_body, created_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (api_key_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, order_id = excluded.order_id,
           response_status = excluded.response_status, response_body = excluded.response_body,
           created_at = excluded.created_at, expires_at = excluded.expires_at`,
      ),
    }
  }

  /**
   * pending → cancelled. Of several cancels of one order in a batch the first cancels it, and the
   * later ones find it cancelled, with the first one's time and reason.
   */
  cancel(
    batch: Batch,
    trace: TraceContext | undefined,
    id: bigint,
    cancelledByKey: bigint | null,
    reason: CancellationReason | null,
    expected: ExpectedVersion,
  ): CancelResult {
    const changed = this.statements.cancel.get(batch.now, cancelledByKey, reason, id, version(expected))
    return this.answer(batch, trace, CANCEL, id, expected, changed)
  }

  ship(batch: Batch, trace: TraceContext | undefined, id: bigint, expected: ExpectedVersion): ShipResult {
    return this.answer(batch, trace, SHIP, id, expected, this.statements.ship.get(batch.now, id, version(expected)))
  }

  complete(batch: Batch, trace: TraceContext | undefined, id: bigint, expected: ExpectedVersion): CompleteResult {
    return this.answer(batch, trace, COMPLETE, id, expected, this.statements.complete.get(batch.now, id, version(expected)))
  }

  /**
   * updateOrder: the order as this transaction reads it, the patch applied by the rule both stores
   * share (order-patch.ts), and when it changed anything, the row and its `order.updated` event.
   */
  update(batch: Batch, trace: TraceContext | undefined, { id, patch, expected }: UpdateRequest): UpdateResult {
    const row = this.statements.find.get(id) as OrderV2Row | undefined
    const result = applyPatch(row === undefined ? undefined : toOrderV2Record(row), patch, expected)
    if (result.outcome !== 'updated') return result
    const { order, previous } = result
    this.statements.update.run(order.petId, order.quantity === null ? null : BigInt(order.quantity), order.shipDate, metadataText(order.metadata), BigInt(order.version), id)
    this.statements.insertEvent.run(...orderEvent('order.updated', batch.now, id, orderV2Json(order), trace, previousJson(previous)))
    batch.changed()
    return result
  }

  /**
   * A new pending order, its id above every id held (placedId; the places before it in the batch
   * included), its event, and its Idempotency-Key record. A record that has not expired answers
   * instead, and nothing is written; an expired one is replaced (keyAnswer).
   */
  place(batch: Batch, trace: TraceContext | undefined, { order, idempotency: claim }: PlaceRequest): PlaceResult {
    if (claim !== undefined) {
      const answer = keyAnswer(this.statements.findKey.get(claim.apiKeyId, claim.key) as StoredKey | undefined, claim.fingerprint, batch.now)
      if (answer !== undefined) return answer
    }
    const id = placedId(this.statements.maxId.get() as bigint | null)
    if (id === undefined) return { outcome: 'ids_exhausted' }
    const placed = newOrder(id, order)
    const json = orderV2Json(placed)
    this.statements.insertOrder.run(placed.id, placed.petId, BigInt(order.quantity), placed.shipDate, metadataText(placed.metadata))
    this.statements.insertEvent.run(...orderEvent('order.created', batch.now, placed.id, json, trace))
    batch.changed()
    if (claim !== undefined) {
      const expiresAt = claim.expiresAt.toISOString()
      this.statements.putKey.run(claim.apiKeyId, claim.key, claim.fingerprint, placed.id, PLACED_STATUS, json, batch.now, expiresAt)
    }
    return { outcome: 'placed', order: placed }
  }

  /**
   * The answer of the update of order `id`: when it changed the order, the order as its RETURNING
   * left it, and its event; when it missed, from the order as the same transaction reads it.
   */
  private answer<R>(
    batch: Batch,
    trace: TraceContext | undefined,
    rule: OrderWriteRule<R>,
    id: bigint,
    expected: ExpectedVersion,
    changed: unknown,
  ): R {
    if (changed !== undefined) {
      const row = changed as ChangedRow
      this.statements.insertEvent.run(...orderEvent(rule.event, batch.now, row.id, row.json, trace))
      batch.changed()
      return rule.changed(toOrderV2Record(row))
    }
    const row = this.statements.find.get(id) as OrderV2Row | undefined
    const answer = rule.missed(row === undefined ? undefined : toOrderV2Record(row), expected)
    // Nothing else writes between the update and this read: the order cannot still take the write.
    if (answer === undefined) throw new Error(`order ${id} could take the write its update missed`)
    return answer
  }
}

/** A rule's `from` as its update's condition, and its `to` as the update's assignments. */
const from = (rule: OrderWriteRule<unknown>): string => orderStateCondition(rule.from)
const to = (rule: OrderWriteRule<unknown>): string => orderStateAssignments(rule.to)

/** An If-Match version as a parameter: NULL for none (`coalesce(? = version, TRUE)`). */
const version = (expected: ExpectedVersion): bigint | null => (expected === undefined ? null : BigInt(expected))

function newOrder(id: bigint, order: NewOrder): OrderV2Record {
  return {
    id,
    petId: order.petId,
    quantity: order.quantity,
    shipDate: order.shipDate,
    metadata: order.metadata ?? null,
    version: 1,
    complete: false,
    status: 'pending',
    shippedAt: null,
    completedAt: null,
    cancelledAt: null,
    cancellationReason: null,
  }
}
