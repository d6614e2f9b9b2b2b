import type { CancellationReason } from '../../domain/order-pages.js'
import type { CancelResult } from '../../domain/orders.js'

export interface CancelRequest {
  id: bigint
  cancelledByKey: bigint | null
  reason: CancellationReason | null
}

/**
 * What one batch found for an order: its result, or 'locked' when another transaction held the
 * order's row lock at that moment (the batch skips such rows rather than wait while holding others).
 */
export type BatchOutcome = CancelResult | 'locked'

interface PendingCancel extends CancelRequest {
  resolve: (result: CancelResult) => void
  reject: (error: unknown) => void
}

const NOT_FOUND: CancelResult = { outcome: 'not_found' }

/** More cancels than this wait for the next batch. */
const MAX_BATCH = 5000

/**
 * Group commit for cancels. The cancels that arrive in one turn of the event loop share one
 * transaction (one statement, CANCEL_BATCH in orders-repository.ts): one WAL flush and one
 * data_version bump acknowledge all of them, instead of each cancel waiting for the previous one's
 * flush behind the data_version row lock. One batch is committed at a time; the cancels that arrive
 * meanwhile form the next batch, sent as soon as this one has committed.
 *
 * Every cancel still gets its own exact outcome, and settles only after the batch's COMMIT: a 204 is
 * never sent for a change that is not durable. If the batch fails, nothing in it committed and every
 * cancel in it is rejected with that error. Of several cancels of one order in a batch the first
 * decides (as if they ran in arrival order), with its key and reason: at most one is 'cancelled',
 * the others 'already_cancelled' with the same order. An order whose row was locked by another
 * transaction is cancelled on its own right after the batch, waiting for that lock as a single
 * cancel always has.
 *
 * Each request carries its reason, and each result the order as it stands, for v2's answer: the
 * batch's one statement returns them (RETURNING of its UPDATE, and its snapshot's rows of orders
 * cancelled before), so a batch is still one round trip whatever its size.
 */
export class CancelBatcher {
  private queue: PendingCancel[] = []
  private scheduled = false
  private running: Promise<void> | undefined
  private readonly singles = new Set<Promise<unknown>>()

  constructor(
    /** One transaction for distinct orders; resolves after COMMIT with an outcome per order id. */
    private readonly commitBatch: (requests: CancelRequest[]) => Promise<Map<bigint, BatchOutcome>>,
    /** One cancel in its own transaction, waiting for any lock on the order. */
    private readonly cancelOne: (request: CancelRequest) => Promise<CancelResult>,
  ) {}

  cancel(id: bigint, cancelledByKey: bigint | null, reason: CancellationReason | null = null): Promise<CancelResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ id, cancelledByKey, reason, resolve, reject })
      this.schedule()
    })
  }

  /** Waits until every cancel already requested has settled. */
  async drain(): Promise<void> {
    while (this.scheduled || this.running !== undefined || this.singles.size > 0) {
      await (this.running ?? new Promise<void>((resolve) => setImmediate(resolve)))
      await Promise.allSettled([...this.singles])
    }
  }

  private schedule(): void {
    if (this.scheduled || this.running !== undefined) return
    this.scheduled = true
    // After the I/O of this turn: every cancel whose request arrived in it joins the batch.
    setImmediate(() => {
      this.scheduled = false
      this.flush()
    })
  }

  private flush(): void {
    const batch = this.queue.splice(0, MAX_BATCH)
    if (batch.length === 0) return
    this.running = this.run(batch).finally(() => {
      this.running = undefined
      if (this.queue.length > 0) this.schedule()
    })
  }

  private async run(batch: PendingCancel[]): Promise<void> {
    const first = new Map<bigint, PendingCancel>()
    for (const pending of batch) if (!first.has(pending.id)) first.set(pending.id, pending)
    let found: Map<bigint, BatchOutcome>
    try {
      found = await this.commitBatch([...first.values()].map(({ id, cancelledByKey, reason }) => ({ id, cancelledByKey, reason })))
    } catch (error) {
      for (const pending of batch) pending.reject(error)
      return
    }
    const results = new Map<bigint, Promise<CancelResult>>()
    for (const [id, pending] of first) {
      const result = found.get(id) ?? NOT_FOUND
      if (result !== 'locked') {
        results.set(id, Promise.resolve(result))
        continue
      }
      // Not awaited here: the next batch need not wait for another transaction's lock.
      const single = this.cancelOne({ id, cancelledByKey: pending.cancelledByKey, reason: pending.reason })
      const tracked = single.catch(() => {}).finally(() => this.singles.delete(tracked))
      this.singles.add(tracked)
      results.set(id, single)
    }
    for (const pending of batch) {
      const result = results.get(pending.id)!
      if (first.get(pending.id) === pending) result.then(pending.resolve, pending.reject)
      else result.then((r) => pending.resolve(r.outcome === 'cancelled' ? { ...r, outcome: 'already_cancelled' } : r), pending.reject)
    }
  }
}
