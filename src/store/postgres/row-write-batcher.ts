import { TurnBatches } from './turn-batches.js'

/**
 * What one batch found for an order: its result, or 'locked' when another transaction held the
 * order's row lock at that moment (the batch skips such rows rather than wait while holding others).
 */
export type BatchOutcome<Result> = Result | 'locked'

interface Pending<Request, Result> {
  request: Request
  resolve: (result: Result) => void
  reject: (error: unknown) => void
}

/** More writes than this wait for the next batch. */
const MAX_BATCH = 5000

/** How one kind of write to one order (a cancel, a ship, a complete) is committed. */
export interface RowWrites<Request extends { id: bigint }, Result> {
  /** One transaction for distinct orders; resolves after COMMIT with an outcome per order id. */
  commitBatch: (requests: Request[]) => Promise<Map<bigint, BatchOutcome<Result>>>
  /** One write in its own transaction, waiting for any lock on the order. */
  writeOne: (request: Request) => Promise<Result>
  /** The result for an order the batch did not find. */
  notFound: Result
  /** What a later write of the same order in the batch gets, given the first one's result. */
  repeated: (first: Result) => Result
}

/**
 * Group commit for one kind of write to single orders (cancels, ships, completes). The writes that
 * arrive in one turn of the event loop share one transaction (one statement, e.g. CANCEL_BATCH in
 * orders-repository.ts): one WAL flush and one data_version bump acknowledge all of them, instead of
 * each waiting for the previous one's flush behind the data_version row lock. One batch is
 * committed at a time; the writes that arrive meanwhile form the next batch, sent as soon as this
 * one has committed.
 *
 * Every write still gets its own exact outcome, and settles only after the batch's COMMIT: an answer
 * is never sent for a change that is not durable. If the batch fails, nothing in it committed and
 * every write in it is rejected with that error. Of several writes of one order in a batch the first
 * decides (as if they ran in arrival order): at most one changes it, the others get `repeated` of
 * its result. An order whose row was locked by another transaction is written on its own right
 * after the batch, waiting for that lock as a single write always has.
 *
 * Each result carries the order as it stands, for v2's answer: the batch's one statement returns
 * them (RETURNING of its UPDATE, and its snapshot's rows of the others), so a batch is still one
 * round trip whatever its size.
 */
export class RowWriteBatcher<Request extends { id: bigint }, Result> {
  private readonly batches = new TurnBatches<Pending<Request, Result>>(MAX_BATCH, (batch) => this.run(batch))
  private readonly singles = new Set<Promise<unknown>>()

  constructor(private readonly writes: RowWrites<Request, Result>) {}

  write(request: Request): Promise<Result> {
    return new Promise((resolve, reject) => this.batches.push({ request, resolve, reject }))
  }

  /** Waits until every write already requested has settled, the ones written on their own too. */
  async drain(): Promise<void> {
    for (;;) {
      await this.batches.drain()
      if (this.singles.size === 0) return
      await Promise.allSettled([...this.singles])
    }
  }

  private async run(batch: Pending<Request, Result>[]): Promise<void> {
    const first = new Map<bigint, Pending<Request, Result>>()
    for (const pending of batch) if (!first.has(pending.request.id)) first.set(pending.request.id, pending)
    let found: Map<bigint, BatchOutcome<Result>>
    try {
      found = await this.writes.commitBatch([...first.values()].map((pending) => pending.request))
    } catch (error) {
      for (const pending of batch) pending.reject(error)
      return
    }
    const results = new Map<bigint, Promise<Result>>()
    for (const [id, pending] of first) {
      const result = found.get(id) ?? this.writes.notFound
      if (result !== 'locked') {
        results.set(id, Promise.resolve(result))
        continue
      }
      // Not awaited here: the next batch need not wait for another transaction's lock.
      const single = this.writes.writeOne(pending.request)
      const tracked = single.catch(() => {}).finally(() => this.singles.delete(tracked))
      this.singles.add(tracked)
      results.set(id, single)
    }
    for (const pending of batch) {
      const result = results.get(pending.request.id)!
      if (first.get(pending.request.id) === pending) result.then(pending.resolve, pending.reject)
      else result.then((r) => pending.resolve(this.writes.repeated(r)), pending.reject)
    }
  }
}
