/**
 * Baseline of comparison 5: the project's own server (same app, routes, authentication, logging,
 * metrics, same SQLite store for everything else) except that each cancel is committed in its own
 * transaction, as soon as it arrives — no group commit. The transaction is the one the project's
 * WriteBatcher runs for a batch, for one cancel: BEGIN IMMEDIATE, the conditional UPDATE, the
 * data-version bump, COMMIT. Its connection is opened exactly as the store opens its own (WAL,
 * synchronous=FULL, the server's busy_timeout, foreign_keys, safe integers): every COMMIT syncs the WAL before the
 * 204 is sent, so durability is identical. With BASELINE_SYNCHRONOUS=OFF it commits without syncing
 * at all: durability switched off, the peer a group commit is held to where fsync is so cheap that
 * the durable peer is bound by its CPU. Child process of bench/run.ts; SQLite only.
 */
import type Database from 'better-sqlite3'
import { loadConfig } from '../../src/config.js'
import { SERVER_SQLITE_OPTIONS } from '../../src/server.js'
import type { CancellationReason, CancelResult } from '../../src/domain/orders.js'
import { openStore } from '../../src/store/open-store.js'
import type { OrdersRepository } from '../../src/store/store.js'
import { INSERT_EVENT, orderEvent } from '../../src/store/sqlite/order-events-repository.js'
import { toOrderV2Record, type OrderV2Row } from '../../src/store/rows.js'
import { ORDER_V2_COLUMNS, ORDER_V2_JSON } from '../../src/store/sqlite/order-pages.js'
import { failed } from '../lib/child-side.js'
import { baselineSynchronous, openWriter, serve, SwappedStore } from './swapped-store.js'

/** One synchronous=FULL transaction per cancel (the change, its event, the version) on a writer connection of its own. */
class PerTransactionCancels {
  private readonly db: Database.Database
  private readonly commitOne: Database.Transaction<(id: bigint, cancelledByKey: bigint | null, reason: CancellationReason | null) => CancelResult>

  constructor(path: string, busyTimeoutMs: number, synchronous: 'FULL' | 'OFF') {
    const db = openWriter(path, busyTimeoutMs, synchronous)
    // The statements of the project's batcher: RETURNING the order cancelled (and its JSON for its
    // event, written as the project writes it), else reading it.
    const columns = ORDER_V2_COLUMNS
    const cancel = db.prepare(
      `UPDATE orders SET status = 'cancelled', cancelled_at = ?, cancelled_by_key = ?, cancellation_reason = ?
       WHERE id = ? AND status = 'pending' RETURNING ${columns}, ${ORDER_V2_JSON} AS json`,
    )
    const insertEvent = db.prepare(INSERT_EVENT)
    const find = db.prepare(`SELECT ${columns} FROM orders WHERE id = ?`)
    const bump = db.prepare('UPDATE data_version SET version = version + 1 WHERE id = 1')
    this.commitOne = db.transaction((id: bigint, cancelledByKey: bigint | null, reason: CancellationReason | null): CancelResult => {
      const now = new Date().toISOString()
      const changed = cancel.get(now, cancelledByKey, reason, id) as (OrderV2Row & { json: string }) | undefined
      if (changed !== undefined) {
        insertEvent.run(...orderEvent('order.cancelled', now, id, changed.json))
        bump.run()
        return { outcome: 'cancelled', order: toOrderV2Record(changed) }
      }
      const row = find.get(id) as OrderV2Row | undefined
      if (row?.status === 'cancelled') return { outcome: 'already_cancelled', order: toOrderV2Record(row) }
      return { outcome: row?.status === 'shipped' ? 'already_shipped' : 'not_found' }
    })
    this.db = db
  }

  cancel(id: bigint, cancelledByKey: bigint | null, reason: CancellationReason | null): CancelResult {
    return this.commitOne.immediate(id, cancelledByKey, reason)
  }

  close(): void {
    this.db.close()
  }
}

try {
  const config = loadConfig()
  if (config.database.kind !== 'sqlite') throw new Error('the per-transaction cancel baseline is for SQLite')
  const inner = await openStore(config.database, SERVER_SQLITE_OPTIONS)
  await inner.migrate()
  const cancels = new PerTransactionCancels(config.database.path, SERVER_SQLITE_OPTIONS.busyTimeoutMs, baselineSynchronous())
  const cancel: OrdersRepository['cancel'] = async (id, cancelledByKey, reason = null) => cancels.cancel(id, cancelledByKey, reason)
  await serve(config, new SwappedStore(inner, { cancel }, () => cancels.close()))
} catch (error) {
  failed(error)
}
