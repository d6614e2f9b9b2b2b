import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

/**
 * Peak resident set size (VmHWM) and current RSS (VmRSS) of a live process, in bytes, from
 * /proc/<pid>/status. VmHWM is the high-water mark since the process started.
 */
export function memoryOf(pid: number | 'self'): { peakRss: number; rss: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string): number => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)
    if (match === null) throw new Error(`/proc/${pid}/status has no ${field}`)
    return Number(match[1]) * 1024
  }
  return { peakRss: kb('VmHWM'), rss: kb('VmRSS') }
}

let ticksPerSecond: number | undefined

export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
    } catch {
      ticksPerSecond = 100
    }
  }
  return ticksPerSecond
}

/** A stat file of /proc (a process's or one of its threads'): its command name, and the fields after it (field 3, the state, is index 0). */
function readStat(path: string): { name: string; fields: string[] } | undefined {
  try {
    const stat = readFileSync(path, 'utf8')
    return { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), fields: stat.slice(stat.lastIndexOf(')') + 2).split(' ') }
  } catch {
    return undefined // gone
  }
}

/** The fields of /proc/<pid>/stat after the command name (field 3, the state, is index 0). */
export function statFields(pid: number | 'self'): string[] | undefined {
  return readStat(`/proc/${pid}/stat`)?.fields
}

/** User + system time of stat fields, in seconds. */
function cpuOf(fields: string[]): number {
  return (Number(fields[11]) + Number(fields[12])) / clockTicks()
}

/**
 * CPU time (user + system) each thread of a live process has used so far, in seconds, summed by the
 * thread's name (Node's event loop is MainThread, a worker_threads Worker WorkerThread, V8's GC and
 * compiler helpers V8Worker, libuv's pool libuv-worker); empty once it is gone.
 */
export function threadCpuSeconds(pid: number): Record<string, number> {
  const byName: Record<string, number> = {}
  let threads: string[]
  try {
    threads = readdirSync(`/proc/${pid}/task`)
  } catch {
    return byName
  }
  for (const thread of threads) {
    const stat = readStat(`/proc/${pid}/task/${thread}/stat`)
    if (stat !== undefined) byName[stat.name] = (byName[stat.name] ?? 0) + cpuOf(stat.fields)
  }
  return byName
}

/**
 * The I/O counters of a live process so far (/proc/<pid>/io): `syscr` and `syscw` (read and write
 * system calls), `write_bytes` (bytes it caused to be sent to storage), …; empty once it is gone.
 */
export function ioCounters(pid: number): Record<string, number> {
  try {
    return Object.fromEntries(
      readFileSync(`/proc/${pid}/io`, 'utf8')
        .trim()
        .split('\n')
        .map((line) => {
          const [name, value] = line.split(': ')
          return [name!, Number(value)]
        }),
    )
  } catch {
    return {}
  }
}

/** CPU time (user + system) a live process has used so far, in seconds; 0 once it is gone. */
export function cpuSeconds(pid: number | 'self'): number {
  const fields = statFields(pid)
  return fields === undefined ? 0 : cpuOf(fields)
}

/**
 * Measures the CPU that `pids` use while `work` runs, as a share of one core each (`cores`), and in
 * seconds (`cpuSeconds`).
 */
export async function cpuDuring<T>(
  pids: Record<string, number | 'self'>,
  work: () => Promise<T>,
): Promise<{ result: T; cores: Record<string, number>; cpuSeconds: Record<string, number> }> {
  const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)]))
  const started = performance.now()
  const result = await work()
  const seconds = (performance.now() - started) / 1000
  const used = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid) - before[name]!]))
  const cores = Object.fromEntries(Object.entries(used).map(([name, cpu]) => [name, cpu / seconds]))
  return { result, cores, cpuSeconds: used }
}
