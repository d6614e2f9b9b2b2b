import { performance } from 'node:perf_hooks'
import type { CounterStore } from './counter-store.js'

interface Window {
  current: number
  startedAt: number
}

type Callback = Parameters<CounterStore['incr']>[1]

/**
 * Fixed-window counters in this process's memory, behind @fastify/rate-limit's store interface
 * (`incr`), answering at once: the callback is called before `incr` returns.
 *
 * A key's window opens at its first count and lasts `windowMs`, on the monotonic clock: setting the
 * wall clock neither ends a window nor stretches one. Bounded in keys: past `maxKeys`, the key
 * counted least recently is forgotten (a Map keeps insertion order, and a key counted is moved to
 * its end), so a flood of new keys or addresses costs memory up to the bound and no further.
 */
export class MemoryCounterStore implements CounterStore {
  private readonly windows = new Map<string, Window>()

  constructor(
    private readonly maxKeys: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  incr(key: string, callback: Callback, windowMs: number): void {
    const now = this.now()
    let window = this.windows.get(key)
    if (window !== undefined) this.windows.delete(key) // set again below, as the most recent
    if (window === undefined || window.startedAt + windowMs <= now) window = { current: 0, startedAt: now }
    window.current++
    this.windows.set(key, window)
    if (this.windows.size > this.maxKeys) this.windows.delete(this.windows.keys().next().value!)
    // At most the window: with a fractional clock, (now + windowMs) - now can come out a hair over
    // windowMs, which the RateLimit header's ceiling would show as 61 s of a 60 s window.
    callback(null, { current: window.current, ttl: Math.min(windowMs, window.startedAt + windowMs - now) })
  }
}
