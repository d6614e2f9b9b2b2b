import { Agent, request } from 'node:http'

export interface ProbeResult {
  requests: number
  failures: number
  /** How many failed, by status or error code. */
  failureReasons: Record<string, number>
  p50Ms: number
  p99Ms: number
  maxMs: number
}

/** The `p`th percentile of ascending `sorted` (nearest rank); NaN when empty. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

/**
 * Small requests at a steady rate, one every 1000/rate ms whether or not earlier ones were answered
 * (an open loop, as independent clients would send them), each timed from the moment it was due to
 * its last byte: a server that stalls is charged for every request that waited, not only the one it
 * was serving (no coordinated omission). Runs until `stop()`.
 */
export function steadyProbe(options: { url: string; headers: Record<string, string>; rate: number }): { stop(): Promise<ProbeResult> } {
  // Idle sockets are closed by the client after 4 s, before the server's keep-alive timeout (5 s):
  // otherwise a request sent on a socket the server is closing at that moment fails with
  // ECONNRESET, a known race of HTTP/1.1 keep-alive (nodejs/node#47130) that the bursts of this
  // probe (up to 256 sockets open during a stall, then mostly idle) meet dozens of times a run.
  const agent = new Agent({ keepAlive: true, maxSockets: 256, timeout: 4000 })
  const intervalMs = 1000 / options.rate
  const started = performance.now()
  const latencies: number[] = []
  let failures = 0
  const reasons = new Map<string, number>()
  let sent = 0
  let inFlight = 0
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  let idle: (() => void) | undefined

  const send = (dueAt: number): void => {
    inFlight++
    const finish = (ok: boolean, reason = ''): void => {
      if (ok) latencies.push(performance.now() - dueAt)
      else {
        failures++
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1)
      }
      if (--inFlight === 0) idle?.()
    }
    const req = request(options.url, { headers: options.headers, agent, timeout: 60_000 }, (res) => {
      res.resume()
      res.on('end', () => finish(res.statusCode === 200, `status ${res.statusCode}`))
      res.on('error', (error: NodeJS.ErrnoException) => finish(false, `response ${error.code ?? error.message}`))
    })
    req.on('error', (error: NodeJS.ErrnoException) => finish(false, `request ${error.code ?? error.message}`))
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.end()
  }

  const tick = (): void => {
    if (stopped) return
    const now = performance.now()
    // Every request due by now is sent now, each keeping the time it was due.
    while (started + sent * intervalMs <= now) send(started + sent++ * intervalMs)
    timer = setTimeout(tick, Math.max(0, started + sent * intervalMs - performance.now()))
  }
  tick()

  return {
    async stop() {
      stopped = true
      clearTimeout(timer)
      if (inFlight > 0) await new Promise<void>((resolve) => (idle = resolve))
      agent.destroy()
      const sorted = latencies.sort((a, b) => a - b)
      return { requests: sent, failures, failureReasons: Object.fromEntries(reasons), p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), maxMs: sorted.at(-1) ?? NaN }
    },
  }
}
