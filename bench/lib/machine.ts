import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/** Busy and total CPU time of the whole machine so far, in clock ticks (/proc/stat). */
function cpuTicks(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
  const total = fields.reduce((sum, value) => sum + value, 0)
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0) // idle + iowait
  return { busy: total - idle, total }
}

/** Cores kept busy over the next `ms` by all processes of the machine. */
export async function busyCores(ms = 1000): Promise<number> {
  const cores = readFileSync('/proc/stat', 'utf8').split('\n').filter((line) => /^cpu\d/.test(line)).length
  const before = cpuTicks()
  await sleep(ms)
  const after = cpuTicks()
  return ((after.busy - before.busy) / Math.max(1, after.total - before.total)) * cores
}

const QUIET = 0.25 // cores
let waitBudgetMs = Number(process.env.BENCH_QUIET_WAIT_S ?? 120) * 1000

/**
 * Called between benches, while the bench itself is idle: what the rest of the machine is doing.
 * When other processes keep more than a quarter of a core busy, waits for them (at most
 * BENCH_QUIET_WAIT_S, 120 s by default, over the whole run), then goes on and says so: a figure
 * measured on a busy 2-core machine is not a figure of the service.
 */
export async function otherLoad(): Promise<number> {
  let load = await busyCores()
  if (load <= QUIET || waitBudgetMs <= 0) return load
  console.log(`  other processes keep ${load.toFixed(2)} cores busy; waiting for the machine to be quiet …`)
  while (load > QUIET && waitBudgetMs > 0) {
    waitBudgetMs -= 1000
    load = await busyCores()
  }
  return load
}

export function describeLoad(load: number): string {
  return load <= QUIET
    ? `Machine quiet before this bench (${load.toFixed(2)} cores busy).`
    : `WARNING: other processes kept ${load.toFixed(2)} of the cores busy just before this bench; its figures are unreliable.`
}
