/**
 * The server's CPU per request of one GET under each sampler, against tracing off: the project's
 * server (compiled as `npm run bench` compiles it) on a fresh 100-order SQLite database, one server
 * per setting kept running, 10 connections of autocannon, the settings run in turn in each round
 * (reversed in odd rounds). Spans are exported over OTLP/HTTP protobuf to the bench's sink
 * (lib/otlp-sink.ts, which counts and drops them), as in comparison 11. Prints, per setting, the
 * median of the rounds and each round, in µs of the server's CPU a request (/proc, warm-up
 * included), and the reads and writes it made a request; then, per traced setting, what it adds
 * to off in the same round (median and range of the rounds' differences) and its rate against
 * off's (median and range of the rounds' ratios).
 * `RATIOS` (comma-separated, e.g. 0.01,0.1) adds `parentbased_traceidratio` at each ratio;
 * `--cpu-prof` leaves one profile per setting in .bench/profiles/samplers-<setting>/. `STORE=postgres` runs the servers on a
 * fresh PostgreSQL database instead (the bench's, as `npm run bench` finds it). `PREWARM` (seconds;
 * unset, none) has each server answer the path that long before the rounds, unmeasured: at 10%
 * sampled, V8 takes 10–15 s to bring the SDK's recording path to its steady cost (profile-spans.ts,
 * `WINDOWS`).
 *
 *   node --import tsx bench/profile-samplers.ts [path] [rounds] [seconds] [--cpu-prof]
 */
import { join } from 'node:path'
import { bearer } from './lib/client.js'
import { compileBench } from './lib/compile.js'
import { dropAllDatabases, storeKind } from './lib/databases.js'
import { PETS } from './lib/dataset.js'
import { positiveInteger } from './lib/env.js'
import { closedLoop, requireAllOk } from './lib/load.js'
import { ROOT } from './lib/paths.js'
import { cpuDuring, ioCounters } from './lib/proc.js'
import { killAllChildren, PROJECT_ENV, startServerChild, type RunningChild } from './lib/processes.js'
import { interleavedRounds, median, roundRatios } from './lib/report.js'
import { createDatabase, seed } from './suites/context.js'
import { ratioSampler, ratiosToProfile, TRACING_OFF, tracingOn } from './suites/tracing.js'

const args = process.argv.slice(2).filter((arg) => arg !== '--cpu-prof')
const profile = process.argv.includes('--cpu-prof')
const path = args[0] ?? '/v2/store/orders/42'
const rounds = Number(args[1] ?? 6)
const seconds = Number(args[2] ?? 4)
const store = storeKind(process.env.STORE ?? 'sqlite', 'STORE')
const prewarmSeconds = positiveInteger('PREWARM')

compileBench()
const database = await createDatabase(store)
try {
  const sink = await startServerChild('OTLP sink', 'lib/otlp-sink.ts', {})
  const traced = (sampler: Record<string, string>): Record<string, string> => tracingOn(sink.url, sampler)
  const settings: [string, Record<string, string>][] = [
    ['off', TRACING_OFF],
    ['always_off', traced({ OTEL_TRACES_SAMPLER: 'always_off' })],
    ...ratiosToProfile().map((ratio): [string, Record<string, string>] => [`ratio ${ratio}`, traced(ratioSampler(ratio))]),
  ]
  const { secret } = await seed(database, 100, { pets: PETS, key: true })
  const headers = bearer(secret!)
  const servers = new Map<string, RunningChild>()
  for (const [name, env] of settings) {
    const nodeOptions = profile ? ['--cpu-prof', `--cpu-prof-dir=${join(ROOT, '.bench', 'profiles', `samplers-${name.replace(' ', '-')}`)}`] : []
    servers.set(name, await startServerChild(name, 'lib/project-server.ts', { DATABASE_URL: database.url, ...PROJECT_ENV, ...env }, { nodeOptions }))
  }
  if (prewarmSeconds !== undefined) {
    for (const [name] of settings) requireAllOk(`${name} pre-warm`, await closedLoop({ url: `${servers.get(name)!.url}${path}`, headers, connections: 10, seconds: prewarmSeconds, warmupSeconds: 0 }))
  }
  const perRequest = new Map<string, { us: number[]; rates: number[]; reads: number[]; writes: number[] }>(
    settings.map(([name]) => [name, { us: [], rates: [], reads: [], writes: [] }]),
  )
  await interleavedRounds(
    rounds,
    settings.map(([name]) => async () => {
      const server = servers.get(name)!
      const before = ioCounters(server.child.pid)
      const measured = await cpuDuring({ server: server.child.pid }, () =>
        closedLoop({ url: `${server.url}${path}`, headers, connections: 10, seconds, warmupSeconds: 1 }),
      )
      const after = ioCounters(server.child.pid)
      const requests = requireAllOk(name, measured.result).requests + measured.result.warmupRequests
      const figures = perRequest.get(name)!
      figures.us.push((measured.cpuSeconds.server! * 1e6) / requests)
      figures.rates.push(measured.result.perSecond)
      figures.reads.push((after.syscr! - before.syscr!) / requests)
      figures.writes.push((after.syscw! - before.syscw!) / requests)
    }),
  )
  console.log(`GET ${path}: the server's CPU a request, µs (median, then each round); read and write system calls a request`)
  for (const [name, { us, reads, writes }] of perRequest) {
    console.log(`${name.padEnd(12)} ${median(us).toFixed(1).padStart(6)}  (${us.map((value) => value.toFixed(1)).join(' ')})  ${median(reads).toFixed(2)} / ${median(writes).toFixed(2)}`)
  }
  const off = perRequest.get('off')!
  console.log("against off in the same round: the server's CPU it adds a request, µs; its rate, as a ratio")
  for (const [name, { us, rates }] of perRequest) {
    if (name === 'off') continue
    const added = roundRatios(us, off.us, (on, untraced) => on - untraced)
    const rate = roundRatios(rates, off.rates)
    console.log(
      `${name.padEnd(12)} ${added.median >= 0 ? '+' : ''}${added.median.toFixed(1)} µs (${added.min.toFixed(1)} to ${added.max.toFixed(1)})  ${rate.median.toFixed(3)}× (${rate.min.toFixed(3)}–${rate.max.toFixed(3)})`,
    )
  }
  for (const server of servers.values()) await server.child.stop()
} finally {
  killAllChildren()
  await dropAllDatabases()
}
