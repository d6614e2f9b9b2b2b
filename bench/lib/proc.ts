import { readFileSync } from 'node:fs'

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
