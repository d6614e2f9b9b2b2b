/** A batch's results, one per request in order; a promise for one settled later (a write redone alone). */
export type BatchResults<Result> = readonly (Result | Promise<Result>)[]

/** When a batch's error passes (another process holds SQLite's lock), its requests are tried again. */
export interface RetryPolicy {
  transient: (error: unknown) => boolean
  /** The wait before the next attempt, off the event loop; what is queued meanwhile joins it. */
  afterMs: number
  /** A request queued this long ago fails with the error instead. */
  forMs: number
}

export interface GroupCommitOptions<Request, Result> {
  /**
   * Commits a batch of requests, in arrival order, in one transaction, synchronously or not; returns
   * after COMMIT. If it throws or rejects, nothing in it committed.
   */
  commit: (requests: Request[]) => BatchResults<Result> | Promise<BatchResults<Result>>
  /** More requests than this wait for the next batch. */
  maxBatch?: number
  retry?: RetryPolicy
}

type Resolve<Result> = (result: Result | Promise<Result>) => void
type Reject = (error: unknown) => void

/** Requests in arrival order, with their promises' settle functions: parallel arrays, no object per request. */
class Queue<Request, Result> {
  constructor(
    readonly requests: Request[] = [],
    readonly resolves: Resolve<Result>[] = [],
    readonly rejects: Reject[] = [],
    /** When each was queued (Date.now()), with a retry policy; else 0. */
    readonly queuedAt: number[] = [],
  ) {}

  get length(): number {
    return this.requests.length
  }

  push(request: Request, resolve: Resolve<Result>, reject: Reject, queuedAt: number): void {
    this.requests.push(request)
    this.resolves.push(resolve)
    this.rejects.push(reject)
    this.queuedAt.push(queuedAt)
  }

  /** The first `count`, taken out into a queue of their own. */
  take(count: number): Queue<Request, Result> {
    const { requests, resolves, rejects, queuedAt } = this
    return new Queue(requests.splice(0, count), resolves.splice(0, count), rejects.splice(0, count), queuedAt.splice(0, count))
  }
}

/**
 * The schedule of a group commit, for every store. The requests queued in one turn of the event
 * loop form a batch, committed in its check phase, after the turn's I/O: one transaction, one WAL
 * flush, acknowledges all of them. One batch is in flight at a time; what arrives meanwhile forms
 * the next batch, started in the turn after this one settled. Every request settles only after its
 * batch's commit, with its own result (an answer is never sent for a change that is not durable);
 * a batch that fails rejects every request in it with its error.
 */
export class GroupCommit<Request, Result> {
  private queue = new Queue<Request, Result>()
  /** A flush is due: in this turn's check phase, or at a retry's timer. */
  private scheduled = false
  /** An asynchronous commit is in flight. */
  private running = false
  /** Results that settle after their batch, which drain waits for too. */
  private readonly late = new Set<Promise<unknown>>()
  private progress: Promise<void> | undefined
  private wake: (() => void) | undefined
  private readonly commit: GroupCommitOptions<Request, Result>['commit']
  private readonly maxBatch: number
  private readonly retry: RetryPolicy | undefined

  constructor(options: GroupCommitOptions<Request, Result>) {
    this.commit = options.commit
    this.maxBatch = options.maxBatch ?? Infinity
    this.retry = options.retry
  }

  /** Queues `request` for the next batch; settles once that batch has committed, or failed. */
  submit(request: Request): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.queue.push(request, resolve, reject, this.retry === undefined ? 0 : Date.now())
      if (!this.scheduled && !this.running) this.schedule()
    })
  }

  /** Waits until every request already submitted has settled. */
  async drain(): Promise<void> {
    for (;;) {
      if (this.scheduled || this.running) await (this.progress ??= new Promise((resolve) => (this.wake = resolve)))
      else if (this.late.size > 0) await Promise.allSettled([...this.late])
      else return
    }
  }

  private schedule(): void {
    this.scheduled = true
    setImmediate(this.flush)
  }

  private readonly flush = (): void => {
    this.scheduled = false
    let batch = this.queue
    if (batch.length > this.maxBatch) batch = batch.take(this.maxBatch)
    else this.queue = new Queue()
    if (batch.length === 0) return this.settled()
    let results: BatchResults<Result> | Promise<BatchResults<Result>>
    try {
      results = this.commit(batch.requests)
    } catch (error) {
      this.fail(batch, error)
      return this.settled()
    }
    if (Array.isArray(results)) {
      this.resolve(batch, results)
      return this.settled()
    }
    this.running = true
    ;(results as Promise<BatchResults<Result>>).then(
      (results) => this.resolve(batch, results),
      (error: unknown) => this.fail(batch, error),
    ).then(this.settled)
  }

  private resolve(batch: Queue<Request, Result>, results: BatchResults<Result>): void {
    const { resolves } = batch
    for (let i = 0; i < resolves.length; i++) {
      const result = results[i]!
      if (result instanceof Promise) {
        this.late.add(result)
        const forget = (): void => void this.late.delete(result)
        result.then(forget, forget)
      }
      resolves[i]!(result)
    }
  }

  private fail(batch: Queue<Request, Result>, error: unknown): void {
    const retry = this.retry
    if (retry === undefined || !retry.transient(error)) {
      for (const reject of batch.rejects) reject(error)
      return
    }
    // Those that may wait longer go back to the front of the queue, in order, for one timer.
    const now = Date.now()
    const kept = new Queue<Request, Result>()
    for (let i = 0; i < batch.length; i++) {
      if (now - batch.queuedAt[i]! < retry.forMs) kept.push(batch.requests[i]!, batch.resolves[i]!, batch.rejects[i]!, batch.queuedAt[i]!)
      else batch.rejects[i]!(error)
    }
    const { queue } = this
    for (let i = 0; i < queue.length; i++) kept.push(queue.requests[i]!, queue.resolves[i]!, queue.rejects[i]!, queue.queuedAt[i]!)
    this.queue = kept
    if (kept.length === 0) return
    this.scheduled = true
    setTimeout(this.flush, retry.afterMs)
  }

  /** After a flush: the next batch is scheduled if one is queued, and drain looks again. */
  private readonly settled = (): void => {
    this.running = false
    if (this.queue.length > 0 && !this.scheduled) this.schedule()
    const wake = this.wake
    if (wake === undefined) return
    this.progress = this.wake = undefined
    wake()
  }
}
