/**
 * What the OpenTelemetry SDK itself costs per traced request, without HTTP or a database: the
 * service's own tracing setup (src/tracing/sdk.ts: batch processor, OTLP/HTTP protobuf exporter,
 * AsyncLocalStorage context) making the spans of a small GET — a SERVER span with the request's
 * attributes and, active under it, one CLIENT span for its store call — in a loop, against the same
 * loop with no SDK loaded (the API's no-op), and with the SDK loaded but nothing sampled. `RATIOS`
 * (comma-separated, e.g. 0.01,0.1) adds `parentbased_traceidratio` at each ratio, and with it the
 * cost of one sampled request at that ratio over nothing sampled: what the server's own figures under
 * the same samplers (profile-samplers.ts) can be held against. Each variant runs in a fresh child
 * process (the SDK registers globally), in paired rounds; exports go to bench/lib/otlp-sink.ts in a
 * process of its own and are included (the last at shutdown). The figure is CPU time per request,
 * the loop's own share included: compare it with the server's CPU per request in comparison 11.
 *
 * `TICK` (default 100) is how many requests run at each wake-up of the loop, every TICK/10 ms: the
 * same 10,000 a second, in larger or smaller bursts. `WINDOWS` (default 1) splits each measured run
 * into that many equal slices and prints, for each sampler, a sampled request's cost slice by slice:
 * how long the SDK's path takes to reach its steady cost at that ratio.
 *
 *   node --import tsx bench/profile-spans.ts [rounds] [requests]
 */
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { positiveInteger } from './lib/env.js'
import { median } from './lib/report.js'
import { ratioSampler, ratiosToProfile } from './suites/tracing.js'

interface Variant {
  name: string
  /** The sampler's variables; none: the SDK is not loaded. */
  sampler?: Record<string, string>
}
const VARIANTS: readonly Variant[] = [
  { name: 'no SDK' },
  { name: 'SDK, nothing sampled', sampler: { OTEL_TRACES_SAMPLER: 'always_off' } },
  ...ratiosToProfile().map((ratio) => ({ name: `SDK, ratio ${ratio}`, sampler: ratioSampler(ratio) })),
  { name: 'SDK, every request sampled', sampler: { OTEL_TRACES_SAMPLER: 'always_on' } },
]
const SELF = fileURLToPath(import.meta.url)
/** Sampled requests in the warm-up: two full batches of the batch processor (512 spans each, OTEL_BSP_MAX_EXPORT_BATCH_SIZE's default), at 2 spans a request. */
const WARM_SAMPLED = 512 + 1

if (process.env.PROFILE_SPANS_SDK !== undefined) await child(process.env.PROFILE_SPANS_SDK === '1', Number(process.env.PROFILE_SPANS_REQUESTS))
else await main(Number(process.argv[2] ?? 5), Number(process.argv[3] ?? 50_000))

async function main(rounds: number, requests: number): Promise<void> {
  // A bad TICK or WINDOWS stops the run here, before any child.
  tick()
  windows()
  const sink = fork(fileURLToPath(new URL('./lib/otlp-sink.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  try {
    const { url } = await message<{ url: string }>(sink, 'ready')
    const perRequest = new Map<Variant, number[]>(VARIANTS.map((variant) => [variant, []]))
    const sampledShare = new Map<Variant, number>()
    const perWindow = new Map<Variant, number[][]>(VARIANTS.map((variant) => [variant, []]))
    for (let round = 0; round < rounds; round++) {
      // Alternate the order, so that neither variant always runs first.
      for (const variant of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()) {
        const worker = fork(SELF, [], {
          execArgv: ['--import', 'tsx'],
          env: {
            ...process.env,
            PROFILE_SPANS_SDK: variant.sampler === undefined ? '0' : '1',
            PROFILE_SPANS_REQUESTS: String(requests),
            OTEL_EXPORTER_OTLP_ENDPOINT: url,
            OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
            OTEL_TRACES_SAMPLER_ARG: '',
            ...variant.sampler,
          },
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        })
        const before = await spansAt(sink)
        const done = await message<{ us: number; windows: number[]; sampled: number; measuredSampled: number }>(worker, 'done')
        perRequest.get(variant)!.push(done.us)
        perWindow.get(variant)!.push(done.windows)
        sampledShare.set(variant, done.measuredSampled / requests)
        // Every span of a sampled request reached the sink (none dropped by a full queue), and none else.
        const exported = (await spansAt(sink)) - before
        if (exported !== 2 * done.sampled) throw new Error(`${variant.name}: the sink received ${exported} spans, not ${2 * done.sampled}`)
      }
    }
    const none = median(perRequest.get(VARIANTS[0]!)!)
    const unsampled = median(perRequest.get(VARIANTS[1]!)!)
    console.log(`${requests.toLocaleString('en')} requests of 2 spans each, ${rounds} rounds (CPU µs per request: median, then each round)`)
    for (const [variant, us] of perRequest) {
      const over = variant.sampler === undefined ? '' : `; +${(median(us) - none).toFixed(1)} µs over no SDK`
      const share = sampledShare.get(variant)!
      const each = share > 0 ? `; ${(share * 100).toFixed(1)}% sampled, ${((median(us) - unsampled) / share).toFixed(1)} µs a sampled request over nothing sampled` : ''
      console.log(`  ${variant.name.padEnd(27)} ${median(us).toFixed(1).padStart(6)} µs (${us.map((value) => value.toFixed(1)).join(', ')})${over}${each}`)
    }
    const slices = windows()
    if (slices > 1) {
      // Each slice's median over the rounds, less nothing sampled's in the same slice, per sampled request.
      const sliceMedians = (variant: Variant): number[] => Array.from({ length: slices }, (_, i) => median(perWindow.get(variant)!.map((round) => round[i]!)))
      const base = sliceMedians(VARIANTS[1]!)
      console.log(`A sampled request over nothing sampled, µs, in each of ${slices} slices of the run (${(requests / slices).toLocaleString('en')} requests each):`)
      for (const variant of VARIANTS) {
        const share = sampledShare.get(variant)!
        if (share > 0) console.log(`  ${variant.name.padEnd(27)} ${sliceMedians(variant).map((us, i) => ((us - base[i]!) / share).toFixed(0)).join(' ')}`)
      }
    }
  } finally {
    sink.kill('SIGTERM')
  }
}

/** One variant (with the SDK or not; its sampler from the environment): warm up, then `requests` requests' spans, measured with the SDK's last export. */
async function child(sdk: boolean, requests: number): Promise<void> {
  const { context, propagation, ROOT_CONTEXT, SpanKind, trace } = await import('@opentelemetry/api')
  let shutdown = async (): Promise<void> => {}
  if (sdk) {
    const { startTracing } = await import('../src/tracing/sdk.js')
    const { tracingConfig } = await import('../src/config.js')
    const { default: pino } = await import('pino')
    // The OTEL_* variables the parent set, read as the server reads them.
    const tracing = await startTracing(tracingConfig()!, pino({ level: 'warn' }))
    shutdown = () => tracing.shutdown()
  }
  const tracer = trace.getTracer('petstore-orders')
  const headers = { host: '127.0.0.1', accept: 'application/json' }
  let sampled = 0
  const request = (): void => {
    // As src/tracing/server-spans.ts and store-spans.ts do for one request with one store call.
    const parent = propagation.extract(ROOT_CONTEXT, headers)
    const server = tracer.startSpan(
      'GET /v2/store/orders/{orderId}',
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'url.path': '/v2/store/orders/42', 'http.route': '/v2/store/orders/{orderId}' } },
      parent,
    )
    // A read not sampled runs outside any span (server-spans.ts): no store span, nothing to end.
    if (!server.isRecording()) return
    sampled++
    context.with(trace.setSpan(parent, server), () => {
      const store = tracer.startSpan('orders.find', { kind: SpanKind.CLIENT, attributes: { 'db.system': 'sqlite', 'db.system.name': 'sqlite', 'db.operation.name': 'orders.find' } })
      context.with(trace.setSpan(context.active(), store), () => store.end())
    })
    server.setAttribute('http.response.status_code', 200)
    server.end()
  }
  // 100 requests every 10 ms (TICK: that many every TICK/10 ms), 10,000 a second as a busy server
  // answers small GETs, with the event loop free between them for the batch processor's timer and
  // exports: its queue (2,048) never fills, and every span is exported.
  const perWakeUp = tick()
  const run = async (count: number): Promise<void> => {
    for (let done = 0; done < count; done += perWakeUp) {
      for (let i = 0; i < Math.min(perWakeUp, count - done); i++) request()
      await sleep(perWakeUp / 10)
    }
  }
  // Warm-up: 10,000 requests, and with a sampler that samples any, as many more as it takes to
  // hand the batch processor two full batches. The SDK loads and compiles its exporter's path on
  // the first export: at 1% that comes only seconds in, and counted it made a sampled request look
  // several times dearer than it is once the server has run a while.
  await run(Math.min(requests, 10_000))
  if (sdk && process.env.OTEL_TRACES_SAMPLER !== 'always_off') {
    while (sampled < WARM_SAMPLED) await run(perWakeUp)
    await sleep(200) // the second batch's export answered
  }
  const warmupSampled = sampled
  // The run in WINDOWS slices, each timed; the last with the SDK's last export.
  const slices = windows()
  const perSlice: number[] = []
  const before = process.cpuUsage()
  for (let slice = 0; slice < slices; slice++) {
    const sliceBefore = process.cpuUsage()
    const count = Math.floor((requests * (slice + 1)) / slices) - Math.floor((requests * slice) / slices)
    await run(count)
    if (slice === slices - 1) await shutdown()
    const used = process.cpuUsage(sliceBefore)
    perSlice.push((used.user + used.system) / count)
  }
  const used = process.cpuUsage(before)
  process.send!({ type: 'done', us: (used.user + used.system) / requests, windows: perSlice, sampled, measuredSampled: sampled - warmupSampled })
  process.disconnect()
}

/** TICK: the requests run at each wake-up of the loop (100 by default). */
function tick(): number {
  return positiveInteger('TICK') ?? 100
}

/** WINDOWS: the slices each measured run is timed in (1 by default). */
function windows(): number {
  return positiveInteger('WINDOWS') ?? 1
}

async function spansAt(sink: ChildProcess): Promise<number> {
  const reply = message<{ spans: number }>(sink, 'stats')
  sink.send({ type: 'stats' })
  return (await reply).spans
}

function message<T>(from: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (received: { type: string; message?: string } & T): void => {
      if (received.type === type) done(() => resolve(received))
      else if (received.type === 'error') done(() => reject(new Error(received.message)))
    }
    const onExit = (code: number | null): void => done(() => reject(new Error(`${type}: the child exited (${code}) first`)))
    const done = (settle: () => void): void => {
      from.off('message', onMessage).off('exit', onExit)
      settle()
    }
    from.on('message', onMessage).on('exit', onExit)
  })
}
