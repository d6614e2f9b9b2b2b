import { setImmediate as nextTurn } from 'node:timers/promises'
import type { OrderEventsRepository } from '../store/order-events.js'

const DAY_MS = 86_400_000
/** How often a pass runs (the first one at start). */
export const PRUNE_INTERVAL_MS = 60_000
/** Events deleted per transaction: each one short, so no writer waits long behind it. */
export const PRUNE_BATCH = 1000

export interface EventPrunerOptions {
  retentionDays: number
  log: { info(fields: object, message: string): void; warn(fields: object, message: string): void }
  intervalMs?: number
  batch?: number
  now?: () => number
}

/**
 * Retention of the order event feed (EVENTS_RETENTION_DAYS): a pass at start and then every minute
 * deletes the events older than the retention, a batch per transaction, yielding to requests
 * between batches. Every instance runs one; their passes may overlap, which the store allows (a
 * batch deletes the oldest events, and an event another pass deleted is simply not there). A failed
 * pass is logged and the next one tries again: retention is late, never wrong.
 */
export class EventPruner {
  private readonly intervalMs: number
  private readonly batch: number
  private readonly now: () => number
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false

  constructor(
    private readonly events: OrderEventsRepository,
    private readonly options: EventPrunerOptions,
  ) {
    this.intervalMs = options.intervalMs ?? PRUNE_INTERVAL_MS
    this.batch = options.batch ?? PRUNE_BATCH
    this.now = options.now ?? Date.now
  }

  /** Runs a pass now and one every interval after it, until `stop`. */
  start(): void {
    if (this.stopped || this.running !== undefined || this.timer !== undefined) return
    const pass = (): void => {
      this.timer = undefined
      this.running = this.prune()
        .then(
          (deleted) => {
            if (deleted > 0) this.options.log.info({ deleted, retentionDays: this.options.retentionDays }, 'order events pruned')
          },
          (error: unknown) => this.options.log.warn({ err: error }, 'pruning order events failed; the next pass tries again'),
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

  /** One pass: every event older than the retention, a batch at a time. Returns how many it deleted. */
  async prune(): Promise<number> {
    const cutoff = new Date(this.now() - this.options.retentionDays * DAY_MS)
    let total = 0
    for (;;) {
      const deleted = await this.events.prune(cutoff, this.batch)
      total += deleted
      if (deleted < this.batch || this.stopped) return total
      await nextTurn() // requests waiting for the event loop go first
    }
  }
}
