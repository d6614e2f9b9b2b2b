import { bearer } from '../lib/client.js'
import type { BenchDatabase } from '../lib/databases.js'
import { placeLoad, requireAllOk, type KeyKind, type LoadResult } from '../lib/load.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { cpuDuring, ioCounters, threadCpuSeconds } from '../lib/proc.js'
import { fmt, median, pairedRounds, roundRatios, verdict, type RoundRatios, type Row } from '../lib/report.js'
import { bigDataset, type StoreContext } from './context.js'

const CONNECTIONS = 50
export const WARMUP_PLACES = 1_000
const MAX_SECONDS = 10
/** Caps per measured run: MAX_SECONDS at rates well above this machine's, and a bounded growth of the data set. */
const PROJECT_PLACES = 60_000
const BASELINE_PLACES = 20_000
const ROUNDS = 3
/**
 * Each run places its orders for a pet of its own, far above the data set's pets (1–1000): after the
 * SIGKILL, that pet's orders in the database are the run's, to count against its 201s.
 */
const FIRST_MARKER_PET = 9_000_000_000_000
let nextMarker = FIRST_MARKER_PET

/** A pet no order of the data set has, and no other run of this bench process uses. */
export function markerPet(): number {
  return nextMarker++
}

export interface PlaceRun extends LoadResult {
  /** CPU of the server and of the load generator during the measured run, as shares of one core. */
  cpu: Record<string, number>
  /** The server's CPU time per request of the measured run, in µs. */
  serverUs: number
  /** The same by thread name (lib/proc.ts threadCpuSeconds): SQLite's writer is a WorkerThread. */
  threadUs: Record<string, number>
  /** Bytes the server sent to storage per request of the measured run (WAL, checkpoints; PostgreSQL writes in its own processes). */
  storageBytes: number
  /** The run's orders in the database after the server was SIGKILLed. */
  durable: number
}

export interface Variant {
  /** With an Idempotency-Key on every request: a UUID of this version, or a client's counter (see placeLoad). */
  keys?: KeyKind
  /** No key and no nonce: one request built once and sent again (see placeLoad). */
  prebuilt?: true
  /** Called for every order, the warm-up's too: its metadata (placeOrder's `metadata`). */
  metadata?: () => Record<string, string>
  env?: Record<string, string>
}

/**
 * Places: 50 concurrent clients placing orders (POST /v2/store/orders, 201), the project's server
 * (group commit) against the same server committing each place in its own transaction
 * (baselines/per-transaction-place-server.ts), durably and with durability switched off; and the
 * project with an Idempotency-Key on every request against without: time-ordered keys (UUIDv7, the
 * project's client's), random ones (UUIDv4) and a client's counter (`bench-<run>-<client>-<n>`), each
 * against the same load without keys. Every run's requests
 * are built the same way, each with a fresh UUID (placeLoad); for information, a run without keys
 * also sends one prebuilt request again, the load generator's cheapest, and the server's CPU per
 * place is shown. Paired rounds (lib/report.ts), each run on a fresh server, SIGKILLed at its end:
 * every acknowledged place must be in the database.
 */
export async function places(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const section = context.report.section('Durable places, 50 concurrent clients', context.label, 'one transaction per place')
  const run = (name: string, script: string, amount: number, variant: Variant = {}): Promise<PlaceRun> =>
    placeRun(context, name, script, amount, markerPet(), variant)
  const peer = 'baselines/per-transaction-place-server.ts'
  // Durability off: SQLite's synchronous=OFF; PostgreSQL's synchronous_commit=off for the peer's sessions.
  const unsyncedEnv: Record<string, string> =
    context.kind === 'sqlite' ? { BASELINE_SYNCHRONOUS: 'OFF' } : { DATABASE_URL: withOptions(big.database.url, '-c synchronous_commit=off') }
  const unsyncedName = context.kind === 'sqlite' ? 'synchronous=OFF' : 'synchronous_commit=off'

  const rounds = await pairedRounds(
    ROUNDS,
    async () => ({
      durable: await run('per-transaction place server', peer, BASELINE_PLACES),
      unsynced: await run(`per-transaction place server, ${unsyncedName}`, peer, PROJECT_PLACES, { env: unsyncedEnv }),
    }),
    // Keyed and unkeyed in turns too, so that none always follows another.
    async (round) => {
      const variants: [string, Variant][] = [
        ['project server', {}],
        ['project server, UUIDv7 Idempotency-Keys', { keys: 7 }],
        ['project server, UUIDv4 Idempotency-Keys', { keys: 4 }],
        ['project server, counter Idempotency-Keys', { keys: 'counter' }],
        ['project server, one prebuilt request', { prebuilt: true }],
      ]
      const results: PlaceRun[] = []
      for (let i = 0; i < variants.length; i++) {
        const which = (i + round) % variants.length
        const [name, variant] = variants[which]!
        results[which] = await run(name, 'lib/project-server.ts', PROJECT_PLACES, variant)
      }
      return { plain: results[0]!, keyed: results[1]!, random: results[2]!, counted: results[3]!, prebuilt: results[4]! }
    },
  )
  const project = rounds.project.map((round) => round.plain)
  const keyed = rounds.project.map((round) => round.keyed)
  const random = rounds.project.map((round) => round.random)
  const counted = rounds.project.map((round) => round.counted)
  const prebuilt = rounds.project.map((round) => round.prebuilt)
  const durable = rounds.baseline.map((round) => round.durable)
  const unsynced = rounds.baseline.map((round) => round.unsynced)
  const rate = (results: PlaceRun[]): number => median(results.map((result) => result.perSecond))
  const ratios = (of: PlaceRun[], to: PlaceRun[]): RoundRatios => roundRatios(of.map((r) => r.perSecond), to.map((r) => r.perSecond))
  const againstDurable = ratios(project, durable)
  const againstUnsynced = ratios(project, unsynced)
  const keyCost = ratios(keyed, project)
  const randomKeyCost = ratios(random, project)
  const counterKeyCost = ratios(counted, project)
  const againstPrebuilt = ratios(keyed, prebuilt)
  const medianServerUs = (results: PlaceRun[]): number => median(results.map((result) => result.serverUs))
  const serverCost = roundRatios(keyed.map((r) => r.serverUs), project.map((r) => r.serverUs))
  // As for cancels: group commit pays where a sync is dear; where it is so cheap that committing
  // each place alone is bound by its CPU, the target is to cost (nearly) nothing against no sync.
  const groupCommitPays = againstDurable.median >= 5 || againstUnsynced.median >= 0.9
  // Each kind of key against the same load without keys.
  const keyedRow = (kind: string, runs: PlaceRun[], cost: RoundRatios): Row => ({
    measure: `with an Idempotency-Key (${kind}) on every request, against without`,
    project: fmt.rate(rate(runs), 'places/s'),
    baseline: `${fmt.rate(rate(project), 'places/s')} (project, no key)`,
    ratio: fmt.rounds(cost),
    target: '≥ 0.8×',
    result: verdict(cost.median >= 0.8),
  })
  const cpuRow = (result: PlaceRun): string => `${Math.round(result.cpu.server! * 100)}% / ${Math.round(result.cpu.client! * 100)}%`
  const all = [...project, ...keyed, ...random, ...counted, ...prebuilt, ...durable, ...unsynced]
  const acknowledged = sum(all, (r) => r.ok)
  section.rows.push(
    {
      measure: `places per second (201), ${ROUNDS} paired rounds`,
      project: fmt.rate(rate(project), 'places/s'),
      baseline: fmt.rate(rate(durable), 'places/s'),
      ratio: fmt.rounds(againstDurable),
      target: '≥ 5× (or the row below)',
      result: verdict(groupCommitPays),
    },
    {
      measure: `against the same peer with durability off (${unsyncedName})`,
      project: fmt.rate(rate(project), 'places/s'),
      baseline: fmt.rate(rate(unsynced), 'places/s'),
      ratio: fmt.rounds(againstUnsynced),
      target: '≥ 0.9× (or the row above)',
      result: verdict(groupCommitPays),
    },
    keyedRow('UUIDv7, as the client makes', keyed, keyCost),
    {
      measure: "the server's CPU per place, with UUIDv7 keys against without",
      project: `${medianServerUs(keyed).toFixed(0)} µs`,
      baseline: `${medianServerUs(project).toFixed(0)} µs (project, no key)`,
      ratio: fmt.rounds(serverCost),
      result: 'info',
    },
    {
      measure: 'with UUIDv7 keys, against runs without that send one prebuilt request again',
      project: fmt.rate(rate(keyed), 'places/s'),
      baseline: `${fmt.rate(rate(prebuilt), 'places/s')} (project, prebuilt)`,
      ratio: fmt.rounds(againstPrebuilt),
      result: 'info',
    },
    keyedRow('a random UUIDv4', random, randomKeyCost),
    keyedRow('a counter, `bench-<run>-<client>-<n>`', counted, counterKeyCost),
    {
      measure: "the server's CPU per place, with UUIDv4 and counter keys",
      project: `${medianServerUs(random).toFixed(0)} µs, ${medianServerUs(counted).toFixed(0)} µs`,
      baseline: `${medianServerUs(project).toFixed(0)} µs (project, no key)`,
      result: 'info',
    },
    {
      measure: 'latency p50 / p99 (last round; project; with UUIDv7 keys)',
      project: `${project.at(-1)!.p50Ms} / ${project.at(-1)!.p99Ms} ms; ${keyed.at(-1)!.p50Ms} / ${keyed.at(-1)!.p99Ms} ms`,
      baseline: `${durable.at(-1)!.p50Ms} / ${durable.at(-1)!.p99Ms} ms`,
      result: 'info',
    },
    {
      measure: 'CPU: server / load generator (of one core, last round; project; with UUIDv7 keys)',
      project: `${cpuRow(project.at(-1)!)}; ${cpuRow(keyed.at(-1)!)}`,
      baseline: cpuRow(durable.at(-1)!),
      result: 'info',
    },
    {
      measure: 'durable after SIGKILL (every run)',
      project: `${fmt.count(sum(all, (r) => Math.min(r.durable, r.ok)))} of ${fmt.count(acknowledged)} acknowledged`,
      target: 'all',
      result: verdict(all.every((result) => result.durable >= result.ok)),
    },
  )
  const runs = (results: PlaceRun[]): string => results.map((r) => `${fmt.count(r.requests)} in ${r.seconds.toFixed(2)} s`).join(', ')
  section.notes.push(
    `Runs: project ${runs(project)}; with UUIDv7 keys ${runs(keyed)}; with UUIDv4 keys ${runs(random)}; with counter keys ${runs(counted)}; prebuilt ${runs(prebuilt)}; peer ${runs(durable)}; peer with durability off ${runs(unsynced)} (each on a fresh server, after ${fmt.count(WARMUP_PLACES)} warm-up places, then SIGKILLed); ratios ${fmt.roundList(againstDurable)}, ${fmt.roundList(againstUnsynced)}, ${fmt.roundList(keyCost)}, ${fmt.roundList(randomKeyCost)}, ${fmt.roundList(counterKeyCost)} and ${fmt.roundList(againstPrebuilt)}.`,
    "Every request but the prebuilt runs' carries a new UUID, as its Idempotency-Key or else in X-Bench-Nonce (a header no server acts on): the load generator builds each request anew, so runs with and without keys differ only in what the server does; the generator's own CPU still shares the host's cores with the server.",
    context.kind === 'sqlite'
      ? 'The project and the durable peer use synchronous=FULL in WAL mode: every COMMIT syncs the WAL before its 201s are sent. The peer runs the place transaction on a connection of its own, one place per BEGIN IMMEDIATE … COMMIT.'
      : "PostgreSQL with synchronous_commit=on (its default) and DATABASE_POOL_SIZE=10 (the default). The peer commits each place in its own transaction (the project's place statements for one request), up to 10 at once on a pool of its own; they queue for the writers' lock, held to COMMIT.",
  )
}

/**
 * One run on a fresh server: `CONNECTIONS` clients, warm-up places first, then `amount` measured (at
 * most `MAX_SECONDS`), all for the pet `marker`; then SIGKILL, and that pet's orders counted.
 */
export async function placeRun(context: StoreContext, name: string, script: string, amount: number, marker: number, variant: Variant): Promise<PlaceRun> {
  const big = context.big!
  const server = await startServerChild(name, script, { DATABASE_URL: big.database.url, ...PROJECT_ENV, ...variant.env })
  const load = { origin: server.url, headers: bearer(big.secret), connections: CONNECTIONS, idempotencyKeys: variant.keys, prebuilt: variant.prebuilt, metadata: variant.metadata }
  try {
    requireAllOk(`${name} warm-up`, await placeLoad({ ...load, petId: 1, amount: WARMUP_PLACES, maxSeconds: 60 }))
    const { pid } = server.child
    const [threadsBefore, ioBefore] = [threadCpuSeconds(pid), ioCounters(pid)]
    const measured = await cpuDuring({ server: pid, client: 'self' }, () => placeLoad({ ...load, petId: marker, amount, maxSeconds: MAX_SECONDS }))
    const [threadsAfter, ioAfter] = [threadCpuSeconds(pid), ioCounters(pid)]
    const perRequest = (value: number): number => value / measured.result.requests
    const serverUs = perRequest(measured.cpuSeconds.server! * 1e6)
    const threadUs = Object.fromEntries(Object.entries(threadsAfter).map(([thread, seconds]) => [thread, perRequest((seconds - (threadsBefore[thread] ?? 0)) * 1e6)]))
    const result = requireAllOk(name, measured.result)
    // No graceful shutdown: whatever was acknowledged must already be on disk.
    await server.child.kill()
    const durable = await placedFor(big.database, marker)
    return { ...result, durable, cpu: measured.cores, serverUs, threadUs, storageBytes: perRequest(ioAfter.write_bytes! - ioBefore.write_bytes!) }
  } finally {
    await server.child.kill()
  }
}

function placedFor(database: BenchDatabase, petId: number): Promise<number> {
  const parameter = database.kind === 'sqlite' ? '?' : '$1'
  return database.count(`SELECT count(*) FROM orders WHERE pet_id = ${parameter}`, [petId])
}

/** A PostgreSQL URL whose sessions start with these server options (libpq's `options`). */
function withOptions(url: string, options: string): string {
  const parsed = new URL(url)
  parsed.searchParams.set('options', options)
  return parsed.toString()
}

function sum(results: PlaceRun[], of: (result: PlaceRun) => number): number {
  return results.reduce((total, result) => total + of(result), 0)
}
