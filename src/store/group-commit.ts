import type { Span } from '@opentelemetry/api'
import { activeTraceContext, type TraceContext } from '../trace-context.js'
import { activeSpan, traceBatch } from './batch-span.js'

/** A batch's results, one per request in order; a promise for one settled later (a write redone alone). */
export type BatchResults<Result> = readonly (Result | Promise<Result>)[]

/** When a batch's error passes (another process holds SQLite's lock), its requests are tried again. */
interface RetryPolicy {
  transient: (error: unknown) => boolean
  /** The wait before the next attempt, off the event loop; what is queued meanwhile joins it. */
  afterMs: number
  /** A request first refused this long ago fails with the error instead. */
  forMs: number
}

export interface GroupCommitOptions<Request, Result> {
  /**
   * Commits a batch of requests, in arrival order, in one transaction, synchronously or not; returns
   * after COMMIT. If it throws or rejects, nothing in it committed. With `traceContexts`, `traces[i]`
   * is request i's trace context (see there); without, `traces` is empty.
   */
  commit: (requests: Request[], traces: readonly (TraceContext | undefined)[]) => BatchResults<Result> | Promise<BatchResults<Result>>
  /** More requests than this wait for the next batch. */
  maxBatch?: number
  /**
   * Whether each request keeps the trace context active when it was submitted (activeTraceContext;
   * undefined when none was), for what its write records: the batch is committed outside the
   * request that submitted it.
   */
  traceContexts?: boolean
  retry?: RetryPolicy
}

interface Pending<Request, Result> {
  request: Request
  /** The traced request's span, when tracing is on: the batch's commit is shown in its trace. */
  span: Span | undefined
  /** Its trace context, with `traceContexts`. */
  trace: TraceContext | undefined
  resolve: (result: Result | Promise<Result>) => void
  reject: (error: unknown) => void
  /** Date.now() when its batch first failed with a transient error. */
  refusedAt: number | undefined
}

const NO_TRACES: readonly TraceContext[] = []

/**
 * The schedule of a group commit, for every store. The requests queued in one turn of the event
 * loop form a batch, committed in its check phase, after the turn's I/O: one transaction, one WAL
 * flush, acknowledges all of them. One batch is in flight at a time; what arrives meanwhile forms
 * the next batch, started in the turn after this one settled. Every request settles only after its
 * batch's commit, with its own result (an answer is never sent for a change that is not durable);
 * a batch that fails rejects every request in it with its error.
 *
 * The trace a request is made in is taken here, as it is submitted, once: its span, for the
 * batch's own span (batch-span.ts), and with `traceContexts` its trace context, for the commit.
 */
export class GroupCommit<Request, Result> {
  private queue: Pending<Request, Result>[] = []
  /** A flush is due: in this turn's check phase, or at a retry's timer. */
  private scheduled = false
  /** An asynchronous commit is in flight. */
  private running = false
  /** Results that settle after their batch, which drain waits for too. */
  private readonly late = new Set<Promise<unknown>>()
  private progress: Promise<void> | undefined
  private wake: (() => void) | undefined

  constructor(private readonly options: GroupCommitOptions<Request, Result>) {}

  /** Queues `request` for the next batch; settles once that batch has committed, or failed. */
  submit(request: Request): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      const trace = this.options.traceContexts === true ? activeTraceContext() : undefined
      this.queue.push({ request, span: activeSpan(), trace, resolve, reject, refusedAt: undefined })
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
    const { maxBatch = Infinity, traceContexts = false } = this.options
    const batch = this.queue.length > maxBatch ? this.queue.splice(0, maxBatch) : this.queue
    if (batch === this.queue) this.queue = []
    if (batch.length === 0) return this.settled()
    let results: BatchResults<Result> | Promise<BatchResults<Result>>
    let traced: ReturnType<typeof traceBatch<typeof results>>
    try {
      const traces = traceContexts ? batch.map((pending) => pending.trace) : NO_TRACES
      traced = traceBatch(batch.map((pending) => pending.span), () => this.options.commit(batch.map((pending) => pending.request), traces))
      results = traced.result
    } catch (error) {
      this.fail(batch, error)
      return this.settled()
    }
    if (Array.isArray(results)) {
      traced.settle()
      this.resolve(batch, results)
      return this.settled()
    }
    this.running = true
    ;(results as Promise<BatchResults<Result>>).then(
      (results) => {
        traced.settle()
        this.resolve(batch, results)
      },
      (error: unknown) => {
        traced.settle(error)
        this.fail(batch, error)
      },
    ).then(this.settled)
  }

  private resolve(batch: Pending<Request, Result>[], results: BatchResults<Result>): void {
    for (let i = 0; i < batch.length; i++) {
      const result = results[i]!
      if (result instanceof Promise) {
        this.late.add(result)
        const forget = (): void => void this.late.delete(result)
        result.then(forget, forget)
      }
      batch[i]!.resolve(result)
    }
  }

  private fail(batch: Pending<Request, Result>[], error: unknown): void {
    const retry = this.options.retry?.transient(error) === true ? this.options.retry : undefined
    const now = Date.now()
    // Those that may wait longer go back to the front of the queue, in order, for one timer.
    const kept: Pending<Request, Result>[] = []
    for (const pending of batch) {
      // Counted from the first refusal, not from the queueing: the time a request spent behind other
      // batches (or behind the SQLite writer thread's start) is not time the lock was held.
      if (retry !== undefined && now - (pending.refusedAt ??= now) < retry.forMs) kept.push(pending)
      else pending.reject(error)
    }
    if (retry === undefined || kept.length === 0) return
    this.queue = kept.concat(this.queue)
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
