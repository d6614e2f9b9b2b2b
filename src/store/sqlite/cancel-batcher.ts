import type Database from 'better-sqlite3'
import type { CancelOutcome, OrderStatus } from '../../domain/orders.js'

// While another process holds the write lock (a CLI import, say), a batch is retried off the event
// loop for this long before its cancels fail (503): the connection's own busy wait is kept short.
const BUSY_RETRY_MS = 2000
const BUSY_BACKOFF_MS = 25

interface PendingCancel {
  firstTriedAt?: number
  id: bigint
  cancelledByKey: bigint | null
  resolve: (outcome: CancelOutcome) => void
  reject: (error: unknown) => void
}

/**
 * Group commit for cancels. Cancels that arrive in the same turn of the event loop share one
 * transaction, so one WAL sync (synchronous=FULL) acknowledges all of them. Each cancel is still its
 * own conditional UPDATE with its own outcome, and every promise settles only after COMMIT returned:
 * a 204 is never sent for a change that is not durable. If the transaction fails, nothing in it
 * committed and every cancel in it is rejected.
 */
export class CancelBatcher {
  private queue: PendingCancel[] = []
  private scheduled: Promise<void> | undefined
  private retrying = 0
  private retries: Promise<void> = Promise.resolve()
  private readonly commitBatch: Database.Transaction<(batch: PendingCancel[]) => CancelOutcome[]>

  constructor(db: Database.Database) {
    const cancel = db.prepare(
      `UPDATE orders SET status = 'cancelled', cancelled_at = ?, cancelled_by_key = ? WHERE id = ? AND status = 'pending'`,
    )
    const statusOf = db.prepare('SELECT status FROM orders WHERE id = ?')
    const bump = db.prepare('UPDATE data_version SET version = version + 1 WHERE id = 1')
    this.commitBatch = db.transaction((batch: PendingCancel[]) => {
      const now = new Date().toISOString()
      let cancelled = 0
      const outcomes = batch.map(({ id, cancelledByKey }): CancelOutcome => {
        if (cancel.run(now, cancelledByKey, id).changes === 1) {
          cancelled++
          return 'cancelled'
        }
        const row = statusOf.get(id) as { status: OrderStatus } | undefined
        return row?.status === 'shipped' ? 'already_shipped' : 'not_found'
      })
      if (cancelled > 0) bump.run()
      return outcomes
    })
  }

  cancel(id: bigint, cancelledByKey: bigint | null): Promise<CancelOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ id, cancelledByKey, resolve, reject })
      this.scheduled ??= new Promise((done) =>
        setImmediate(() => {
          this.flush()
          done()
        }),
      )
    })
  }

  /** Waits for the cancels already queued to settle. */
  async drain(): Promise<void> {
    while (this.scheduled !== undefined || this.retrying > 0) {
      await this.scheduled
      await this.retries
    }
  }

  private flush(): void {
    const batch = this.queue
    this.queue = []
    this.scheduled = undefined
    if (batch.length === 0) return // a retry already took this turn's cancels
    let outcomes: CancelOutcome[]
    try {
      outcomes = this.commitBatch.immediate(batch)
    } catch (error) {
      const now = Date.now()
      if ((error as { code?: string }).code === 'SQLITE_BUSY') {
        const retry = batch.filter((pending) => now - (pending.firstTriedAt ??= now) < BUSY_RETRY_MS)
        for (const pending of batch) if (!retry.includes(pending)) pending.reject(error)
        if (retry.length > 0) this.retryLater(retry)
        return
      }
      for (const pending of batch) pending.reject(error)
      return
    }
    batch.forEach((pending, i) => pending.resolve(outcomes[i]!))
  }

  private retryLater(batch: PendingCancel[]): void {
    this.retrying++
    const done = new Promise<void>((resolve) =>
      setTimeout(() => {
        this.retrying--
        this.queue.unshift(...batch)
        this.flush()
        resolve()
      }, BUSY_BACKOFF_MS),
    )
    this.retries = this.retries.then(() => done)
  }
}
