import { setImmediate as nextTurn } from 'node:timers/promises'
import type { OutageLog } from '../outage-log.js'
import { StoreUnavailableError } from '../store/store.js'

/** How often a pass runs (the first one at start). */
const PRUNE_INTERVAL_MS = 60_000
/** Rows deleted per transaction: each one short, so no writer waits long behind it. */
const PRUNE_BATCH = 1000

interface PrunerLog {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
}

/** What every pruner is given: its log, and its timing (tests give their own). */
export interface PrunerOptions {
  log: PrunerLog
  /** Where a pass that failed because the database is unavailable is said, with the requests' own failures; without it, in `log`. */
  databaseOutage?: Pick<OutageLog, 'failed'> | undefined
  intervalMs?: number
  batch?: number
  now?: () => number
}

export interface BatchPrunerOptions extends PrunerOptions {
  /** Deletes at most `limit` rows that are due at `now`; returns how many it deleted. */
  deleteBatch(now: number, limit: number): Promise<number>
  /** The log lines of a pass that deleted rows, and of a failed one. */
  messages: { pruned: string; failed: string }
  /** Fields logged with `pruned` beside `deleted`. */
  fields?: object
}

/**
 * Background deletion of rows past their time, on every serving instance: a pass at start and then
 * every interval deletes what is due, a batch per transaction, yielding to requests between batches.
 * Passes of several instances may overlap, which the stores allow (a row another pass deleted is
 * simply not there). A failed pass is logged and the next one tries again: late, never wrong.
 */
export class BatchPruner {
  private readonly intervalMs: number
  private readonly batch: number
  private readonly now: () => number
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false

  constructor(private readonly options: BatchPrunerOptions) {
    this.intervalMs = options.intervalMs ?? PRUNE_INTERVAL_MS
    this.batch = options.batch ?? PRUNE_BATCH
    this.now = options.now ?? Date.now
  }

  /** Runs a pass now and one every interval after it, until `stop`. */
  start(): void {
    if (this.stopped || this.running !== undefined || this.timer !== undefined) return
    const { log, messages, fields, databaseOutage } = this.options
    const pass = (): void => {
      this.timer = undefined
      this.running = this.prune()
        .then(
          (deleted) => {
            if (deleted > 0) log.info({ deleted, ...fields }, messages.pruned)
          },
          (error: unknown) => {
            if (error instanceof StoreUnavailableError && databaseOutage !== undefined) databaseOutage.failed(error)
            else log.warn({ err: error }, messages.failed)
          },
        )
        .finally(() => {
          this.running = undefined
          if (!this.stopped) this.timer = setTimeout(pass, this.intervalMs).unref()
        })
    }
    pass()
  }

  /** No pass starts after this; resolves once a pass in progress has stopped (between two batches). */
  async stop(): Promise<void> {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    await this.running
  }

  /** One pass: everything due, a batch at a time. Returns how many rows it deleted. */
  async prune(): Promise<number> {
    const now = this.now()
    let total = 0
    for (;;) {
      const deleted = await this.options.deleteBatch(now, this.batch)
      total += deleted
      if (deleted < this.batch || this.stopped) return total
      await nextTurn() // requests waiting for the event loop go first
    }
  }
}
