import { readdirSync, readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { clockTicks, statFields } from './proc.js'

/** Busy and total CPU time of the whole machine so far, in clock ticks (/proc/stat). */
function cpuTicks(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
  const total = fields.reduce((sum, value) => sum + value, 0)
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0) // idle + iowait
  return { busy: total - idle, total }
}

function cores(): number {
  return readFileSync('/proc/stat', 'utf8').split('\n').filter((line) => /^cpu\d/.test(line)).length
}

/** Cores kept busy over the next `ms` by all processes of the machine. */
async function busyCores(ms = 1000): Promise<number> {
  const before = cpuTicks()
  await sleep(ms)
  const after = cpuTicks()
  return ((after.busy - before.busy) / Math.max(1, after.total - before.total)) * cores()
}

const QUIET = 0.25 // cores
let waitBudgetMs = Number(process.env.BENCH_QUIET_WAIT_S ?? 120) * 1000

/**
 * Called between benches, while the bench itself is idle: when other processes keep more than a
 * quarter of a core busy, waits for them (at most BENCH_QUIET_WAIT_S, 120 s by default, over the
 * whole run). A figure measured on a busy 2-core machine is not a figure of the service.
 */
export async function waitForQuiet(): Promise<void> {
  let load = await busyCores()
  if (load <= QUIET || waitBudgetMs <= 0) return
  console.log(`  other processes keep ${load.toFixed(2)} cores busy; waiting for the machine to be quiet …`)
  while (load > QUIET && waitBudgetMs > 0) {
    waitBudgetMs -= 1000
    load = await busyCores()
  }
}

/**
 * CPU used by processes that are not the bench's while a bench runs. Every 500 ms it reads
 * /proc/<pid>/stat of every process; the bench's own are this process, its descendants, and the
 * PostgreSQL backends of its databases (named petstore_bench_… on their command line).
 */
export class ForeignCpu {
  private readonly seen = new Map<number, number>() // pid → CPU ticks at the last sample
  private foreignTicks = 0
  private readonly started = performance.now()
  private readonly bootTicksAtStart: number
  private readonly timer: NodeJS.Timeout

  constructor() {
    this.bootTicksAtStart = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * clockTicks()
    this.sample(true)
    this.timer = setInterval(() => this.sample(false), 500)
  }

  /** Cores used on average by other processes since the start. */
  stop(): number {
    clearInterval(this.timer)
    this.sample(false)
    return this.foreignTicks / clockTicks() / ((performance.now() - this.started) / 1000)
  }

  private sample(first: boolean): void {
    const parents = new Map<number, number>()
    const ticks = new Map<number, number>()
    const startTimes = new Map<number, number>()
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue
      const pid = Number(entry)
      const fields = statFields(pid)
      if (fields === undefined) continue
      parents.set(pid, Number(fields[1]))
      ticks.set(pid, Number(fields[11]) + Number(fields[12]))
      startTimes.set(pid, Number(fields[19]))
    }
    const ours = (pid: number): boolean => {
      for (let p: number | undefined = pid, hops = 0; p !== undefined && p > 1 && hops < 64; p = parents.get(p), hops++) {
        if (p === process.pid) return true
      }
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('petstore_bench_')
      } catch {
        return false
      }
    }
    for (const [pid, now] of ticks) {
      const previous = this.seen.get(pid)
      this.seen.set(pid, now)
      if (first || ours(pid)) continue
      if (previous !== undefined) this.foreignTicks += now - previous
      else if (startTimes.get(pid)! >= this.bootTicksAtStart) this.foreignTicks += now // started since: all of it
    }
  }
}

export function describeForeignLoad(cores: number): string {
  return cores <= 0.1
    ? `Other processes used ${cores.toFixed(2)} cores on average during this bench.`
    : `WARNING: other processes used ${cores.toFixed(2)} cores on average during this bench (of 2): its figures are unreliable.`
}
