import { bearer } from '../lib/client.js'
import type { BenchDatabase } from '../lib/databases.js'
import { placeLoad, requireAllOk, type LoadResult } from '../lib/load.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { cpuDuring } from '../lib/proc.js'
import { fmt, median, pairedRounds, roundRatios, verdict, type RoundRatios } from '../lib/report.js'
import { bigDataset, type StoreContext } from './context.js'

const CONNECTIONS = 50
const WARMUP_PLACES = 1_000
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

interface PlaceRun extends LoadResult {
  /** CPU of the server and of the load generator during the measured run, as shares of one core. */
  cpu: Record<string, number>
  /** The run's orders in the database after the server was SIGKILLed. */
  durable: number
}

interface Variant {
  /** With an Idempotency-Key on every request: a UUID of this version (see placeLoad). */
  keys?: 4 | 7
  env?: Record<string, string>
}

/**
 * Places: 50 concurrent clients placing orders (POST /v2/store/orders, 201), the project's server
 * (group commit) against the same server committing each place in its own transaction
 * (baselines/per-transaction-place-server.ts), durably and with durability switched off; and the
 * project with an Idempotency-Key on every request against without: time-ordered keys (UUIDv7, the
 * project's client's) for the target, random ones (UUIDv4) for what they cost. Every run's requests
 * are built alike, each with a fresh UUID (placeLoad). Paired rounds (lib/report.ts),
 * each run on a fresh server, SIGKILLed at its end: every acknowledged place must be in the database.
 */
export async function places(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const section = context.report.section('Durable places, 50 concurrent clients', context.label, 'one transaction per place')
  let marker = FIRST_MARKER_PET
  const run = (name: string, script: string, amount: number, variant: Variant = {}): Promise<PlaceRun> =>
    placeRun(context, name, script, amount, marker++, variant)
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
      const variants = [undefined, 7, 4] as const // no key, UUIDv7 keys, UUIDv4 keys
      const results: PlaceRun[] = []
      for (let i = 0; i < variants.length; i++) {
        const which = (i + round) % variants.length
        const keys = variants[which]
        const name = keys === undefined ? 'project server' : `project server, UUIDv${keys} Idempotency-Keys`
        results[which] = await run(name, 'lib/project-server.ts', PROJECT_PLACES, { keys })
      }
      return { plain: results[0]!, keyed: results[1]!, random: results[2]! }
    },
  )
  const project = rounds.project.map((round) => round.plain)
  const keyed = rounds.project.map((round) => round.keyed)
  const random = rounds.project.map((round) => round.random)
  const durable = rounds.baseline.map((round) => round.durable)
  const unsynced = rounds.baseline.map((round) => round.unsynced)
  const rate = (results: PlaceRun[]): number => median(results.map((result) => result.perSecond))
  const ratios = (of: PlaceRun[], to: PlaceRun[]): RoundRatios => roundRatios(of.map((r) => r.perSecond), to.map((r) => r.perSecond))
  const againstDurable = ratios(project, durable)
  const againstUnsynced = ratios(project, unsynced)
  const keyCost = ratios(keyed, project)
  const randomKeyCost = ratios(random, project)
  // As for cancels: group commit pays where a sync is dear; where it is so cheap that committing
  // each place alone is bound by its CPU, the target is to cost (nearly) nothing against no sync.
  const groupCommitPays = againstDurable.median >= 5 || againstUnsynced.median >= 0.9
  const cpuRow = (result: PlaceRun): string => `${Math.round(result.cpu.server! * 100)}% / ${Math.round(result.cpu.client! * 100)}%`
  const all = [...project, ...keyed, ...random, ...durable, ...unsynced]
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
    {
      measure: 'with an Idempotency-Key (UUIDv7, as the client makes) on every request, against without',
      project: fmt.rate(rate(keyed), 'places/s'),
      baseline: `${fmt.rate(rate(project), 'places/s')} (project, no key)`,
      ratio: fmt.rounds(keyCost),
      target: '≥ 0.8×',
      result: verdict(keyCost.median >= 0.8),
    },
    {
      measure: 'with a random Idempotency-Key (UUIDv4) on every request, against without',
      project: fmt.rate(rate(random), 'places/s'),
      baseline: `${fmt.rate(rate(project), 'places/s')} (project, no key)`,
      ratio: fmt.rounds(randomKeyCost),
      result: 'info',
    },
    {
      measure: 'latency p50 / p99 (last round; project with keys)',
      project: `${project.at(-1)!.p50Ms} / ${project.at(-1)!.p99Ms} ms; ${keyed.at(-1)!.p50Ms} / ${keyed.at(-1)!.p99Ms} ms`,
      baseline: `${durable.at(-1)!.p50Ms} / ${durable.at(-1)!.p99Ms} ms`,
      result: 'info',
    },
    {
      measure: 'CPU: server / load generator (of one core, last round)',
      project: cpuRow(project.at(-1)!),
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
    `Runs: project ${runs(project)}; with UUIDv7 keys ${runs(keyed)}; with UUIDv4 keys ${runs(random)}; peer ${runs(durable)}; peer with durability off ${runs(unsynced)} (each on a fresh server, after ${fmt.count(WARMUP_PLACES)} warm-up places, then SIGKILLed); ratios ${fmt.roundList(againstDurable)}, ${fmt.roundList(againstUnsynced)}, ${fmt.roundList(keyCost)} and ${fmt.roundList(randomKeyCost)}.`,
    'Every request carries a new UUID, as its Idempotency-Key or else in X-Bench-Nonce (a header no server reads): the load generator builds each request anew in every run, so runs with and without keys differ only in what the server does.',
    context.kind === 'sqlite'
      ? 'The project and the durable peer use synchronous=FULL in WAL mode: every COMMIT syncs the WAL before its 201s are sent. The peer runs the place transaction on a connection of its own, one place per BEGIN IMMEDIATE … COMMIT.'
      : "PostgreSQL with synchronous_commit=on (its default) and DATABASE_POOL_SIZE=10 (the default). The peer commits each place in its own transaction (the project's place statements for one request), up to 10 at once on a pool of its own; they queue for the writers' lock, held to COMMIT.",
  )
}

/**
 * One run on a fresh server: `CONNECTIONS` clients, warm-up places first, then `amount` measured (at
 * most `MAX_SECONDS`), all for the pet `marker`; then SIGKILL, and that pet's orders counted.
 */
async function placeRun(context: StoreContext, name: string, script: string, amount: number, marker: number, variant: Variant): Promise<PlaceRun> {
  const big = context.big!
  const server = await startServerChild(name, script, { DATABASE_URL: big.database.url, ...PROJECT_ENV, ...variant.env })
  const headers = bearer(big.secret)
  try {
    requireAllOk(
      `${name} warm-up`,
      await placeLoad({ origin: server.url, headers, connections: CONNECTIONS, maxSeconds: 60, petId: 1, amount: WARMUP_PLACES, idempotencyKeys: variant.keys }),
    )
    const measured = await cpuDuring({ server: server.child.pid, client: 'self' }, () =>
      placeLoad({ origin: server.url, headers, connections: CONNECTIONS, maxSeconds: MAX_SECONDS, petId: marker, amount, idempotencyKeys: variant.keys }),
    )
    const result = requireAllOk(name, measured.result)
    // No graceful shutdown: whatever was acknowledged must already be on disk.
    await server.child.kill()
    const durable = await placedFor(big.database, marker)
    return { ...result, durable, cpu: measured.cores }
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
