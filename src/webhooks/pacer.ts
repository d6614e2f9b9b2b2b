import { performance, type EventLoopUtilization } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'

export interface PacerOptions {
  /** How often the event loop's utilization is read. */
  windowMs?: number
  /** A window at least this busy, with API requests in it, makes the next one busy. */
  busyUtilization?: number
  /** Once busy, a window at least this busy, with API requests in it, keeps it busy. */
  staysBusyUtilization?: number
  /** Once busy, it ends after this many windows in a row that do not keep it busy. */
  quietWindows?: number
  /** Deliveries started a second, over every endpoint, while busy. */
  busyRate?: number
  /** The event loop's utilization since the last call (performance.eventLoopUtilization otherwise). */
  utilization?: () => number
  now?: () => number
}

const PACER_WINDOW_MS = 50
const BUSY_UTILIZATION = 0.9
const STAYS_BUSY_UTILIZATION = 0.5
const QUIET_WINDOWS = 10
const BUSY_DELIVERIES_PER_SECOND = 50

/**
 * Webhook deliveries take the time the API leaves. Every window (50 ms) the process's event-loop
 * utilization is read; when it was at least 90% and API requests arrived in that window, the
 * instance is busy, and deliveries start at most 50 a second over all endpoints; otherwise at
 * once. Busy, the loop holds little but the API's own work, so it stays busy while requests arrive
 * and keep the loop at least half busy, and ends only after half a second (10 windows) without
 * that: a band and a hold, so that it does not flap as unpaced deliveries fill the loop again or
 * the load pauses for a moment. So a load that saturates an instance, or its database, keeps
 * nearly all of it; the endpoints fall behind and catch up once the load is over, and a trickle
 * still goes out meanwhile. Without API requests (a backlog after a restart) deliveries take the
 * whole loop. The state is the process's own load, never a client's: any instance may serve any
 * request.
 */
export class DeliveryPacer {
  private readonly windowMs: number
  private readonly busyUtilization: number
  private readonly staysBusyUtilization: number
  private readonly quietWindows: number
  /** Windows in a row, while busy, that did not keep it busy. */
  private quiet = 0
  private readonly spacingMs: number
  private readonly utilization: () => number
  private readonly now: () => number
  private timer: NodeJS.Timeout | undefined
  private requests = 0
  private nextSlot = 0
  private busyNow = false

  constructor(options: PacerOptions = {}) {
    this.windowMs = options.windowMs ?? PACER_WINDOW_MS
    this.busyUtilization = options.busyUtilization ?? BUSY_UTILIZATION
    this.staysBusyUtilization = options.staysBusyUtilization ?? STAYS_BUSY_UTILIZATION
    this.quietWindows = options.quietWindows ?? QUIET_WINDOWS
    this.spacingMs = 1000 / (options.busyRate ?? BUSY_DELIVERIES_PER_SECOND)
    this.now = options.now ?? (() => performance.now())
    this.utilization = options.utilization ?? loopUtilization()
  }

  /** Whether deliveries are paced now (the API keeps the loop busy). */
  get busy(): boolean {
    return this.busyNow
  }

  start(): void {
    if (this.timer !== undefined) return
    this.utilization() // the first window starts now
    this.timer = setInterval(() => this.sample(), this.windowMs)
    this.timer.unref()
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
    this.busyNow = false
  }

  request(): void {
    this.requests++
  }

  /** Ends a window: reads its utilization and the requests that arrived in it. */
  sample(): void {
    const utilization = this.utilization()
    const requests = this.requests
    this.requests = 0
    if (!this.busyNow) {
      this.busyNow = requests > 0 && utilization >= this.busyUtilization
      this.quiet = 0
    } else if (requests > 0 && utilization >= this.staysBusyUtilization) {
      this.quiet = 0
    } else if (++this.quiet >= this.quietWindows) {
      this.busyNow = false
      this.nextSlot = 0
    }
  }

  /** Before a delivery starts: undefined when it may start at once, else a wait for its turn. */
  turn(): Promise<void> | undefined {
    if (!this.busyNow) return undefined
    const now = this.now()
    const at = Math.max(now, this.nextSlot)
    this.nextSlot = at + this.spacingMs
    return at > now ? sleep(at - now) : undefined
  }
}

/** The event loop's utilization since the previous call. */
function loopUtilization(): () => number {
  let last: EventLoopUtilization = performance.eventLoopUtilization()
  return () => {
    const current = performance.eventLoopUtilization()
    const window = performance.eventLoopUtilization(current, last)
    last = current
    return window.utilization
  }
}
