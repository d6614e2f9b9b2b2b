import type Database from 'better-sqlite3'
import type { TraceContext } from '../../trace-context.js'
import { GroupCommit } from '../group-commit.js'
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
 * `trace`: the trace context active when it was submitted, for its event (the batch runs outside
 * the request), taken by the group commit with the request's span.
 */
export type Write<R> = (batch: Batch, trace: TraceContext | undefined) => R

/**
 * Group commit (../group-commit.ts) of every write of the API: cancels, places, ships and
 * completes. A batch is one IMMEDIATE transaction, so one WAL sync (synchronous=FULL) acknowledges
 * all of its writes. Each write is still its own statements with its own result, run in arrival
 * order (a place sees the ids of the places before it in the batch, a ship sees a cancel queued
 * before it). A failed transaction commits nothing and rejects every write in it; so callers check
 * their input before they queue a write.
 *
 * Every write that changes an order writes its event in the same transaction (the outbox:
 * ../order-events.ts), so a failed batch leaves neither the change nor the event.
 */
export class WriteBatcher {
  private readonly batches: GroupCommit<Write<unknown>, unknown>

  constructor(
    /**
     * A connection for the batcher alone, whose busy_timeout it sets to 0 for good. (Switching a
     * shared connection's timeout per batch took a PRAGMA prepared each time: SQLite applies
     * `PRAGMA busy_timeout = N` when it prepares the statement, so a statement prepared once and run
     * again does not set it.)
     */
    private readonly db: Database.Database,
    /** BUSY_RETRY_MS, unless the store was opened with another (busyRetryMs: tests end the wait by the lock). */
    retryMs = BUSY_RETRY_MS,
  ) {
    db.pragma('busy_timeout = 0')
    const bump = db.prepare(BUMP_DATA_VERSION)
    const commitBatch = db.transaction((writes: Write<unknown>[], traces: readonly (TraceContext | undefined)[]) => {
      let changes = 0
      const batch: Batch = { now: new Date().toISOString(), changed: () => void changes++ }
      const results = writes.map((write, i) => write(batch, traces[i]))
      if (changes > 0) bump.run()
      return results
    })
    this.batches = new GroupCommit({
      traceContexts: true,
      commit: (writes, traces) => commitBatch.immediate(writes, traces),
      retry: { transient: (error) => (error as { code?: string }).code === 'SQLITE_BUSY', afterMs: BUSY_BACKOFF_MS, forMs: retryMs },
    })
  }

  /** Queues `write` for the next batch; resolves with its result once the batch has committed. */
  submit<R>(write: Write<R>): Promise<R> {
    return this.batches.submit(write) as Promise<R>
  }

  /** Settles what is queued, then closes the connection. */
  async close(): Promise<void> {
    await this.batches.drain()
    this.db.close()
  }
}
