import { GroupCommit, type BatchResults } from '../group-commit.js'

/**
 * What one batch found for an order: its result, or 'locked' when another transaction held the
 * order's row lock at that moment (the batch skips such rows rather than wait while holding others).
 */
export type BatchOutcome<Result> = Result | 'locked'

/** More writes than this wait for the next batch. */
const MAX_BATCH = 5000

/** How one kind of write to one order (a cancel, a ship, a complete) is committed. */
export interface RowWrites<Request extends { id: bigint; expected?: number }, Result> {
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
 * Group commit (../group-commit.ts) for one kind of write to single orders (cancels, ships,
 * completes): a batch is one transaction (one statement: rowWriteStatements in orders-repository.ts),
 * so one WAL flush and one data_version bump acknowledge all of its writes, instead of each waiting
 * for the previous one's flush behind the data_version row lock.
 *
 * Every write still gets its own exact outcome. Of several writes of one order in a batch the first
 * decides (as if they ran in arrival order): at most one changes it, the others get `repeated` of
 * its result (where one of the two requires a version, If-Match, the later one is written on its own
 * after the first instead). An order whose row was locked by another transaction is written on its
 * own right after the batch, waiting for that lock as a single write always has.
 *
 * Each result carries the order as it stands, for v2's answer: the batch's one statement returns
 * them (RETURNING of its UPDATE, and its snapshot's rows of the others), so a batch is still one
 * round trip whatever its size.
 */
export class RowWriteBatcher<Request extends { id: bigint; expected?: number }, Result> {
  private readonly batches = new GroupCommit<Request, Result>({ maxBatch: MAX_BATCH, commit: (requests) => this.commit(requests) })

  constructor(private readonly writes: RowWrites<Request, Result>) {}

  /** Queues `request` for the next batch; settles with its own result once that batch has committed. */
  submit(request: Request): Promise<Result> {
    return this.batches.submit(request)
  }

  /** Waits until every write already requested has settled, the ones written on their own too. */
  drain(): Promise<void> {
    return this.batches.drain()
  }

  private async commit(requests: Request[]): Promise<BatchResults<Result>> {
    const first = new Map<bigint, number>() // an order's id → the index of its first write in the batch
    for (let i = 0; i < requests.length; i++) if (!first.has(requests[i]!.id)) first.set(requests[i]!.id, i)
    const distinct = first.size === requests.length ? requests : requests.filter((request, i) => first.get(request.id) === i)
    const found = await this.writes.commitBatch(distinct)
    const results: (Result | Promise<Result>)[] = new Array(requests.length)
    for (let i = 0; i < requests.length; i++) {
      const request = requests[i]!
      const j = first.get(request.id)!
      if (j < i) {
        const decided = results[j]!
        // Where either requires a version (If-Match), the first's answer is not this one's: this one is
        // written on its own once the first has settled, and judged by the order as the first left it.
        if (request.expected !== undefined || requests[j]!.expected !== undefined) results[i] = Promise.resolve(decided).then(() => this.writes.writeOne(request), () => this.writes.writeOne(request))
        else results[i] = decided instanceof Promise ? decided.then(this.writes.repeated) : this.writes.repeated(decided)
        continue
      }
      const outcome = found.get(request.id) ?? this.writes.notFound
      // Not awaited: the next batch need not wait for another transaction's lock.
      results[i] = outcome === 'locked' ? this.writes.writeOne(request) : outcome
    }
    return results
  }
}
