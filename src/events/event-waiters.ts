import type { MaybePromise } from '../maybe-async.js'

/** How often the data version is read while requests are held. */
const POLL_INTERVAL_MS = 100

/**
 * How a wait ended: the data version moved (read the feed again), the time was up, the instance is
 * shutting down, the instance holds as many requests as it may (at once, or later to make room for
 * another holder), or the client went away.
 */
export type WaitOutcome = { changed: bigint } | 'timeout' | 'closing' | 'full' | 'gone'

interface Waiter {
  holder: string
  seen: bigint
  deadline: number
  finish(outcome: WaitOutcome): void
}

export interface EventWaitersOptions {
  /** At most this many requests held at once; past it a slot is made for a holder with fewer, or `wait` answers 'full'. */
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
 *
 * Slots are shared fairly between holders (API keys): when every slot is taken, a request of a
 * holder with fewer held than the holder with the most (by two or more) takes the slot of that
 * holder's oldest request, which is answered at once ('full'). So a key holding none always gets a
 * slot, one key may use every slot while no one else wants them, and a swap never reverses itself.
 */
export class EventWaiters {
  private readonly waiting = new Set<Waiter>()
  /** Each holder's held requests, oldest first. */
  private readonly heldBy = new Map<string, Set<Waiter>>()
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
   * instance closes, or `gone` is aborted (the client disconnected). 'full' at once when every slot
   * is taken and none can be made for `holder` (see the class), or later when its slot is given to
   * another holder.
   */
  wait(seen: bigint, timeoutMs: number, gone: AbortSignal, holder = ''): Promise<WaitOutcome> {
    if (this.closed) return Promise.resolve('closing')
    if (gone.aborted) return Promise.resolve('gone')
    if (timeoutMs <= 0) return Promise.resolve('timeout')
    if (this.waiting.size >= this.options.maxWaiting && !this.makeRoomFor(holder)) return Promise.resolve('full')
    return new Promise<WaitOutcome>((resolve) => {
      const onGone = (): void => waiter.finish('gone')
      // Its own timer too: a version read that hangs (the database unreachable) must not make the
      // answer late, past the socket's idle timeout.
      const timer = setTimeout(() => waiter.finish('timeout'), timeoutMs)
      const waiter: Waiter = {
        holder,
        seen,
        deadline: performance.now() + timeoutMs,
        finish: (outcome) => {
          if (!this.waiting.delete(waiter)) return
          clearTimeout(timer)
          const held = this.heldBy.get(holder)!
          held.delete(waiter)
          if (held.size === 0) this.heldBy.delete(holder)
          gone.removeEventListener('abort', onGone)
          if (this.waiting.size === 0) this.stopPolling()
          resolve(outcome)
        },
      }
      this.waiting.add(waiter)
      const held = this.heldBy.get(holder)
      if (held === undefined) this.heldBy.set(holder, new Set([waiter]))
      else held.add(waiter)
      gone.addEventListener('abort', onGone, { once: true })
      this.schedule()
    })
  }

  /**
   * Every slot is taken: answers the oldest request of the holder with the most held ('full'), if
   * `holder` holds at least two fewer, and says whether a slot is free now. (A difference of one
   * would only move the imbalance to the other holder.)
   */
  private makeRoomFor(holder: string): boolean {
    const held = this.heldBy.get(holder)?.size ?? 0
    let most: Set<Waiter> | undefined
    for (const requests of this.heldBy.values()) if (most === undefined || requests.size > most.size) most = requests
    if (most === undefined || most.size < held + 2) return false
    most.values().next().value!.finish('full')
    return true
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
