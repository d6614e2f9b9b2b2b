/**
 * Preloaded (`node --import`) into a process the bench times from spawn to exit: at its exit, writes
 * its peak resident set size in bytes (getrusage's ru_maxrss) to the file BENCH_PEAK_RSS_FILE names.
 * Exact, and nothing is sampled while the process runs.
 */
import { writeFileSync } from 'node:fs'

const file = process.env.BENCH_PEAK_RSS_FILE
if (file !== undefined && file !== '') process.on('exit', () => writeFileSync(file, String(process.resourceUsage().maxRSS * 1024)))
