/**
 * What one access line costs the server, per log destination: the process's CPU time (every
 * thread, so the writes count too) per pino line, logged a few lines per turn of the event loop as
 * requests would be. Each variant runs in a process of its own, rounds alternate, the median is
 * shown. `server` is the server's (`logDestination()` in src/server.ts: pino.destination() with
 * minLength 4096, flushed every 250 ms); `sonic-*` are pino.destination() without buffering,
 * asynchronous and synchronous; `noop` throws the lines away: what pino itself costs.
 *
 *   node --import tsx bench/log-lines.ts [TARGET] [ROUNDS]   TARGET: /dev/null (default), a file, or - (stdout)
 */
import { spawnSync } from 'node:child_process'
import { openSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import pino from 'pino'

const VARIANTS = ['server', 'sonic-async', 'sonic-sync', 'noop'] as const
const LINES = 200_000
const WARMUP = 50_000
const PER_TICK = 8

async function measure(variant: string, target: string): Promise<number> {
  const fd = target === '-' ? 1 : openSync(target, 'a')
  let destination: pino.DestinationStream
  if (variant === 'server') {
    const { logDestination } = await import('../src/server.js')
    destination = logDestination(fd)
  } else if (variant === 'noop') destination = { write: () => {} }
  else if (variant === 'sonic-async') destination = pino.destination({ dest: fd, sync: false })
  else if (variant === 'sonic-sync') destination = pino.destination({ dest: fd, sync: true })
  else throw new Error(`unknown variant ${variant}`)
  const logger = pino({}, destination).child({ reqId: 'req-1' })
  let n = 0
  const run = (lines: number): Promise<void> =>
    new Promise((resolve) => {
      const end = n + lines
      const tick = (): void => {
        for (let i = 0; i < PER_TICK; i++, n++) logger.info({ method: 'GET', url: '/v1/store/orders', status: 200, ms: 0.4 + (n % 7) / 10 }, 'request')
        if (n < end) setImmediate(tick)
        else resolve()
      }
      tick()
    })
  await run(WARMUP)
  const start = process.cpuUsage()
  await run(LINES)
  await new Promise((resolve) => setTimeout(resolve, 300)) // the last batch's write, off the loop
  const cpu = process.cpuUsage(start)
  return (cpu.user + cpu.system) / LINES
}

const [, , target = '/dev/null', roundsText = '7', child] = process.argv
if (child !== undefined) {
  process.stderr.write(`${await measure(child, target)}\n`)
} else {
  const rounds = Number(roundsText)
  const results = new Map<string, number[]>(VARIANTS.map((v) => [v, []]))
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()
    for (const variant of order) {
      const out = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), target, '0', variant], {
        stdio: ['ignore', target === '-' ? 'pipe' : 'ignore', 'pipe'],
        encoding: 'utf8',
        maxBuffer: 1024 ** 3,
      })
      results.get(variant)!.push(Number(out.stderr.trim().split('\n').at(-1)))
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  for (const [variant, xs] of results) {
    console.log(`${variant.padEnd(12)} median ${median(xs).toFixed(2)} µs/line   rounds ${xs.map((x) => x.toFixed(2)).join(' ')}`)
  }
}
