import type Database from 'better-sqlite3'
import type { CancellationReason } from '../../domain/order-pages.js'
import type { CancelResult } from '../../domain/orders.js'
import { BUMP_DATA_VERSION } from './migrations.js'
import { INSERT_EVENT, orderEvent } from './order-events-repository.js'
import { ORDER_V2_COLUMNS, ORDER_V2_JSON, toOrderV2Record, type OrderV2Row } from './order-pages.js'

// While another process holds the write lock (a CLI import, say), the queued cancels are retried by
// one timer, off the event loop, until each has waited this long since it was queued; then it fails
// (503). A commit attempt itself never waits for the lock: the batcher's connection is its own, with
// busy_timeout 0.
const BUSY_RETRY_MS = 2000
const BUSY_BACKOFF_MS = 25

interface PendingCancel {
  queuedAt: number
  id: bigint
  cancelledByKey: bigint | null
  reason: CancellationReason | null
  resolve: (result: CancelResult) => void
  reject: (error: unknown) => void
}

/**
 * Group commit for cancels. Cancels that arrive in the same turn of the event loop share one
 * transaction, so one WAL sync (synchronous=FULL) acknowledges all of them. Each cancel is still its
 * own conditional UPDATE with its own outcome, and every promise settles only after COMMIT returned:
 * a 204 (or v2's 200) is never sent for a change that is not durable. If the transaction fails,
 * nothing in it committed and every cancel in it is rejected.
 *
 * Each order a batch cancels gets its `order.cancelled` event in the same transaction (the outbox:
 * ../order-events.ts), so a failed batch leaves neither the change nor the event.
 *
 * Each cancel carries its reason (v2) and gets the order back as it stands: RETURNING of the UPDATE
 * when it cancelled the order, else the row read by the same transaction (the read that also tells
 * a shipped order from an unknown one). Of several cancels of one order in a batch the first
 * cancels it, and the later ones find it cancelled, with the first one's time and reason.
 */
export class CancelBatcher {
  private queue: PendingCancel[] = []
  private scheduled: Promise<void> | undefined
  private retry: Promise<void> | undefined // the pending retry, settled once it has run
  private readonly commitBatch: Database.Transaction<(batch: PendingCancel[]) => CancelResult[]>

  constructor(
    /**
     * A connection for the batcher alone, whose busy_timeout it sets to 0 for good. (Switching a
     * shared connection's timeout per batch took a PRAGMA prepared each time: SQLite applies
     * `PRAGMA busy_timeout = N` when it prepares the statement, so a statement prepared once and run
     * again does not set it.)
     */
    private readonly db: Database.Database,
    /** Called after every commit attempt (the data version may have moved). */
    private readonly onWrite: () => void = () => {},
  ) {
    db.pragma('busy_timeout = 0')
    const cancel = db.prepare(
      `UPDATE orders SET status = 'cancelled', cancelled_at = ?, cancelled_by_key = ?, cancellation_reason = ?
       WHERE id = ? AND status = 'pending' RETURNING ${ORDER_V2_COLUMNS}, ${ORDER_V2_JSON} AS json`,
    )
    const insertEvent = db.prepare(INSERT_EVENT)
    const find = db.prepare(`SELECT ${ORDER_V2_COLUMNS} FROM orders WHERE id = ?`)
    const bump = db.prepare(BUMP_DATA_VERSION)
    this.commitBatch = db.transaction((batch: PendingCancel[]) => {
      // Milliseconds, as toISOString() writes them: what PostgreSQL stores too, and what GET shows.
      const now = new Date().toISOString()
      let cancelled = 0
      const results = batch.map(({ id, cancelledByKey, reason }): CancelResult => {
        // SQLite makes every change of an UPDATE … RETURNING at its first step, which get() takes.
        const changed = cancel.get(now, cancelledByKey, reason, id) as (OrderV2Row & { json: string }) | undefined
        if (changed !== undefined) {
          insertEvent.run(...orderEvent('order.cancelled', now, id, changed.json))
          cancelled++
          return { outcome: 'cancelled', order: toOrderV2Record(changed) }
        }
        const row = find.get(id) as OrderV2Row | undefined
        if (row?.status === 'cancelled') return { outcome: 'already_cancelled', order: toOrderV2Record(row) }
        return { outcome: row?.status === 'shipped' ? 'already_shipped' : 'not_found' }
      })
      if (cancelled > 0) bump.run()
      return results
    })
  }

  cancel(id: bigint, cancelledByKey: bigint | null, reason: CancellationReason | null = null): Promise<CancelResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ queuedAt: Date.now(), id, cancelledByKey, reason, resolve, reject })
      if (this.retry !== undefined) return // the pending retry takes it along
      this.scheduled ??= new Promise((done) =>
        setImmediate(() => {
          this.scheduled = undefined
          this.flush()
          done()
        }),
      )
    })
  }

  /** Waits for the cancels already queued to settle. */
  async drain(): Promise<void> {
    while (this.scheduled !== undefined || this.retry !== undefined) {
      await this.scheduled
      await this.retry
    }
  }

  /** Settles what is queued, then closes the connection. */
  async close(): Promise<void> {
    await this.drain()
    this.db.close()
  }

  private flush(): void {
    const batch = this.queue
    this.queue = []
    if (batch.length === 0) return
    let results: CancelResult[]
    try {
      results = this.commitBatch.immediate(batch)
    } catch (error) {
      if ((error as { code?: string }).code !== 'SQLITE_BUSY') {
        for (const pending of batch) pending.reject(error)
        return
      }
      const now = Date.now()
      const waiting = batch.filter((pending) => now - pending.queuedAt < BUSY_RETRY_MS)
      for (const pending of batch) if (!waiting.includes(pending)) pending.reject(error)
      this.queue.unshift(...waiting)
      if (this.queue.length > 0) this.retryLater()
      return
    } finally {
      this.onWrite()
    }
    batch.forEach((pending, i) => pending.resolve(results[i]!))
  }

  private retryLater(): void {
    this.retry = new Promise((done) =>
      setTimeout(() => {
        this.retry = undefined
        this.flush()
        done()
      }, BUSY_BACKOFF_MS),
    )
  }
}
