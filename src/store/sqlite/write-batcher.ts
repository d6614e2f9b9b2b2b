import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import type { TraceContext } from '../../trace-context.js'
import { GroupCommit } from '../group-commit.js'
import { StoreUnavailableError } from '../store.js'
import type { Batch, OrderWrites } from './order-writes.js'
import { fromThreadError, type ThreadError } from './thread-error.js'

// While another process holds the write lock (a CLI import, say), the queued writes are retried by
// one timer, off the event loop, until each has been refused for this long, whatever the
// store's busy timeout; then it fails (503; for the CLI's ship and complete, an error). A commit
// attempt itself never waits for the lock: the writer's connection is its own, with busy_timeout 0.
const BUSY_RETRY_MS = 2000
const BUSY_BACKOFF_MS = 25

/** The writes a batch runs: OrderWrites's methods, each `(batch, trace, ...args)`. */
export type WriteMethod = 'cancel' | 'place' | 'ship' | 'complete' | 'update'
export type WriteArgs<M extends WriteMethod> = M extends WriteMethod
  ? OrderWrites[M] extends (batch: Batch, trace: TraceContext | undefined, ...args: infer A) => unknown
    ? A
    : never
  : never
export type WriteResult<M extends WriteMethod> = ReturnType<OrderWrites[M]>

/**
 * One write as it crosses to the writer thread: plain data, so it may run more than once (a batch
 * refused for the lock is run again). `trace`: the trace context active when it was submitted, for
 * its event (the batch runs outside the request), taken by the group commit with the request's span.
 */
export interface WriteRequest<M extends WriteMethod = WriteMethod> {
  method: M
  trace: TraceContext | undefined
  args: WriteArgs<M>
}

/** What the writer thread is started with. */
export interface WriterOptions {
  path: string
  busyTimeoutMs: number
}

/** The writer thread's answer to a batch. */
export type WriterReply = { results: unknown[] } | { error: ThreadError }

/**
 * Group commit (../group-commit.ts) of every write of the API: cancels, places, ships, completes
 * and updates. A batch is one IMMEDIATE transaction, so one WAL sync (synchronous=FULL) acknowledges
 * all of its writes. Each write is still its own statements with its own result, run in arrival
 * order (a place sees the ids of the places before it in the batch, a ship sees a cancel queued
 * before it). A failed transaction commits nothing and rejects every write in it; so callers check
 * their input before they queue a write.
 *
 * The transaction runs on a worker thread of its own (writer-thread.ts), started at the first
 * write: while it commits, the event loop keeps serving and queues the next batch. Every write that
 * changes an order writes its event in the same transaction (the outbox: ../order-events.ts), so a
 * failed batch leaves neither the change nor the event.
 */
export class WriteBatcher {
  private readonly batches: GroupCommit<WriteRequest, unknown>
  private worker: Worker | undefined
  /** The batch in flight's settlement (GroupCommit has one at a time). */
  private inFlight: { resolve: (results: unknown[]) => void; reject: (error: unknown) => void } | undefined

  constructor(
    private readonly options: WriterOptions,
    /** BUSY_RETRY_MS, unless the store was opened with another (busyRetryMs: tests end the wait by the lock). */
    retryMs = BUSY_RETRY_MS,
  ) {
    this.batches = new GroupCommit({
      traceContexts: true,
      commit: (writes, traces) => this.commit(writes.map((write, i) => ({ ...write, trace: traces[i] }))),
      retry: { transient: (error) => (error as { code?: string }).code === 'SQLITE_BUSY', afterMs: BUSY_BACKOFF_MS, forMs: retryMs },
    })
  }

  /** Queues one write for the next batch; resolves with its result once the batch has committed. */
  submit<M extends WriteMethod>(method: M, ...args: WriteArgs<M>): Promise<WriteResult<M>> {
    return this.batches.submit({ method, trace: undefined, args } as WriteRequest) as Promise<WriteResult<M>>
  }

  /** Settles what is queued, then closes the connection and ends the thread. */
  async close(): Promise<void> {
    await this.batches.drain()
    const worker = this.worker
    if (worker === undefined) return
    this.worker = undefined
    worker.ref()
    worker.postMessage('close')
    await once(worker, 'exit')
  }

  private commit(requests: WriteRequest[]): Promise<unknown[]> {
    const worker = (this.worker ??= this.startWorker())
    // Held while a batch is in flight, so that a process whose last work is a write waits for it.
    worker.ref()
    return new Promise<unknown[]>((resolve, reject) => {
      this.inFlight = { resolve, reject }
      worker.postMessage({ requests })
    }).finally(() => worker.unref())
  }

  private startWorker(): Worker {
    const worker = new Worker(new URL('./writer-thread.js', import.meta.url), { workerData: this.options satisfies WriterOptions })
    worker.unref()
    worker.on('message', (reply: WriterReply) => {
      const settle = this.inFlight
      this.inFlight = undefined
      if ('results' in reply) settle?.resolve(reply.results)
      else settle?.reject(fromThreadError(reply.error))
    })
    // A thread that dies (it should not) fails the batch in flight; the next batch starts another.
    const stopped = (error: unknown): void => {
      if (this.worker === worker) this.worker = undefined
      const settle = this.inFlight
      this.inFlight = undefined
      settle?.reject(error)
    }
    worker.on('error', stopped)
    worker.on('exit', (code) => stopped(new StoreUnavailableError(`the SQLite writer thread stopped (exit code ${code})`)))
    return worker
  }
}
