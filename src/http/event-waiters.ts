import type { MaybePromise } from '../maybe-async.js'

/** How often the data version is read while requests are held. */
export const POLL_INTERVAL_MS = 100

/**
 * Requests one holder (an API key) may have held at once: a tenth of the instance's limit, at least
 * 10, so that one key cannot take every slot and push everyone else to polling.
 */
export function perHolderLimit(maxWaiting: number): number {
  return Math.max(10, Math.ceil(maxWaiting / 10))
}

/**
 * How a wait ended: the data version moved (read the feed again), the time was up, the instance is
 * shutting down, the instance already holds as many requests as it may, or the client went away.
 */
export type WaitOutcome = { changed: bigint } | 'timeout' | 'closing' | 'full' | 'gone'

interface Waiter {
  seen: bigint
  deadline: number
  finish(outcome: WaitOutcome): void
}

export interface EventWaitersOptions {
  /** At most this many requests held at once; past it `wait` answers 'full' at once. */
  maxWaiting: number
  pollIntervalMs?: number
  /** A failed version read (the database is down): the waiters keep waiting, this is told once per outage. */
  onError?: (error: unknown) => void
}

/**
 * The long polls of the event feed held by this instance (docs/order-events.md).
 *
 * Every transaction that writes events bumps the data version, so a held request needs to read the
 * feed again only when the version it saw has moved. One timer per instance, running only while
 * requests are held, reads the version every POLL_INTERVAL_MS (from memory on PostgreSQL, kept
 * current by LISTEN/NOTIFY; a cheap read on SQLite, which also sees other processes' commits) and
 * wakes the requests whose version it no longer is. A held request holds no database connection.
 */
export class EventWaiters {
  private readonly waiting = new Set<Waiter>()
  private readonly heldBy = new Map<string, number>()
  private readonly pollIntervalMs: number
  private timer: NodeJS.Timeout | undefined
  private polling = false
  private failing = false
  private closed = false

  constructor(
    private readonly dataVersion: () => MaybePromise<bigint>,
    private readonly options: EventWaitersOptions,
  ) {
    this.pollIntervalMs = options.pollIntervalMs ?? POLL_INTERVAL_MS
  }

  /** Requests held now. */
  get size(): number {
    return this.waiting.size
  }

  /**
   * Holds the caller until the data version is no longer `seen`, `timeoutMs` have passed, the
   * instance closes, or `gone` is aborted (the client disconnected). 'full' at once when the
   * instance, or `holder`, already has as many held as it may.
   */
  wait(seen: bigint, timeoutMs: number, gone: AbortSignal, holder?: string): Promise<WaitOutcome> {
    if (this.closed) return Promise.resolve('closing')
    if (gone.aborted) return Promise.resolve('gone')
    if (timeoutMs <= 0) return Promise.resolve('timeout')
    if (this.waiting.size >= this.options.maxWaiting) return Promise.resolve('full')
    const held = holder === undefined ? 0 : (this.heldBy.get(holder) ?? 0)
    if (held >= perHolderLimit(this.options.maxWaiting)) return Promise.resolve('full')
    if (holder !== undefined) this.heldBy.set(holder, held + 1)
    return new Promise<WaitOutcome>((resolve) => {
      const onGone = (): void => waiter.finish('gone')
      // Its own timer too: a version read that hangs (the database unreachable) must not make the
      // answer late, past the socket's idle timeout.
      const timer = setTimeout(() => waiter.finish('timeout'), timeoutMs)
      const waiter: Waiter = {
        seen,
        deadline: performance.now() + timeoutMs,
        finish: (outcome) => {
          if (!this.waiting.delete(waiter)) return
          clearTimeout(timer)
          if (holder !== undefined) {
            const left = this.heldBy.get(holder)! - 1
            if (left === 0) this.heldBy.delete(holder)
            else this.heldBy.set(holder, left)
          }
          gone.removeEventListener('abort', onGone)
          if (this.waiting.size === 0) this.stopPolling()
          resolve(outcome)
        },
      }
      this.waiting.add(waiter)
      gone.addEventListener('abort', onGone, { once: true })
      this.schedule()
    })
  }

  /** Shutting down: every held request is answered now, and later ones are not held. */
  close(): void {
    this.closed = true
    for (const waiter of [...this.waiting]) waiter.finish('closing')
    this.stopPolling()
  }

  /** The next poll, unless one is due or running, or nothing is held. */
  private schedule(): void {
    if (this.timer !== undefined || this.polling || this.closed || this.waiting.size === 0) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.poll()
    }, this.pollIntervalMs)
  }

  private async poll(): Promise<void> {
    this.polling = true
    let version: bigint | undefined
    try {
      version = await this.dataVersion()
      this.failing = false
    } catch (error) {
      // The held requests are answered at their deadline with what they have (an empty page and
      // the cursor they came with, which stays right); the next poll tries again.
      if (!this.failing) this.options.onError?.(error)
      this.failing = true
    } finally {
      this.polling = false
    }
    const now = performance.now()
    for (const waiter of [...this.waiting]) {
      if (version !== undefined && version !== waiter.seen) waiter.finish({ changed: version })
      else if (now >= waiter.deadline) waiter.finish('timeout')
    }
    this.schedule()
  }

  private stopPolling(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }
}
