import type Database from 'better-sqlite3'
import { BUMP_DATA_VERSION } from './migrations.js'

// While another process holds the write lock (a CLI import, say), the queued writes are retried by
// one timer, off the event loop, until each has waited this long since it was queued, whatever the
// store's busy timeout; then it fails (503; for the CLI's ship and complete, an error). A commit
// attempt itself never waits for the lock: the batcher's connection is its own, with busy_timeout 0.
const BUSY_RETRY_MS = 2000
const BUSY_BACKOFF_MS = 25

/** What a write sees of the batch it runs in. */
export interface Batch {
  /** The transaction's time, milliseconds, as toISOString() writes them (what PostgreSQL stores too). */
  readonly now: string
  /** Called by a write that changed an order: the batch then bumps the data version once. */
  changed(): void
}

/**
 * One write: its statements, run inside the batch's transaction, and its result. It may run more
 * than once (a batch refused for the lock is run again), so it keeps no state outside the database.
 */
export type Write<R> = (batch: Batch) => R

interface PendingWrite {
  queuedAt: number
  write: Write<unknown>
  resolve: (result: unknown) => void
  reject: (error: unknown) => void
}

/**
 * Group commit for every write of the API: cancels, places, ships and completes. The writes that
 * arrive in the same turn of the event loop share one IMMEDIATE transaction, so one WAL sync
 * (synchronous=FULL) acknowledges all of them. Each write is still its own statements with its own
 * result, run in arrival order (a place sees the ids of the places before it in the batch, a ship
 * sees a cancel queued before it), and every promise settles only after COMMIT returned: an answer
 * is never sent for a change that is not durable. If the transaction fails, nothing in it committed
 * and every write in it is rejected; so callers check their input before they queue a write.
 *
 * Every write that changes an order writes its event in the same transaction (the outbox:
 * ../order-events.ts), so a failed batch leaves neither the change nor the event.
 */
export class WriteBatcher {
  private queue: PendingWrite[] = []
  private scheduled: Promise<void> | undefined
  private retry: Promise<void> | undefined // the pending retry, settled once it has run
  private readonly commitBatch: Database.Transaction<(batch: PendingWrite[]) => unknown[]>

  constructor(
    /**
     * A connection for the batcher alone, whose busy_timeout it sets to 0 for good. (Switching a
     * shared connection's timeout per batch took a PRAGMA prepared each time: SQLite applies
     * `PRAGMA busy_timeout = N` when it prepares the statement, so a statement prepared once and run
     * again does not set it.)
     */
    private readonly db: Database.Database,
  ) {
    db.pragma('busy_timeout = 0')
    const bump = db.prepare(BUMP_DATA_VERSION)
    this.commitBatch = db.transaction((pending: PendingWrite[]) => {
      let changes = 0
      const batch: Batch = { now: new Date().toISOString(), changed: () => void changes++ }
      const results = pending.map(({ write }) => write(batch))
      if (changes > 0) bump.run()
      return results
    })
  }

  /** Queues `write` for the next batch; resolves with its result once the batch has committed. */
  submit<R>(write: Write<R>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ queuedAt: Date.now(), write, resolve: resolve as (result: unknown) => void, reject })
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

  /** Waits for the writes already queued to settle. */
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
    let results: unknown[]
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
    }
    batch.forEach((pending, i) => pending.resolve(results[i]))
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
