import { bearer } from '../lib/client.js'
import type { BenchDatabase } from '../lib/databases.js'
import { patchLoad, requireAllOk, type LoadResult } from '../lib/load.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { cpuDuring } from '../lib/proc.js'
import { fmt, median, pairedRounds, roundRatios, verdict, type RoundRatios } from '../lib/report.js'
import { cancelRun, CONNECTIONS, WARMUP_CANCELS } from './cancels.js'
import { markerPet, placeRun, WARMUP_PLACES, type PlaceRun, type Variant } from './places.js'
import { bigDataset, type StoreContext } from './context.js'

/** Paired rounds of each comparison, each run on a fresh server. */
const ROUNDS = 5
const MAX_SECONDS = 10
/** A run's orders: at most this many measured changes (fewer when the data set's pending orders run short). */
const CHANGES_PER_RUN = 40_000
const PLACES_PER_RUN = 60_000
const WARMUP_PATCHES = WARMUP_CANCELS

/** The patches measured, each on distinct pending orders that have no metadata and a quantity of 1–5 (lib/dataset.ts). */
const PATCHES = {
  /** One key of 20 characters added: the order's row, its event and the key's row in the metadata index. */
  metadata: { name: 'a metadata key added', patch: { metadata: { note: 'gift-wrap-and-a-card' } } },
  quantity: { name: 'the quantity', patch: { quantity: 9 } },
} as const
type PatchKind = keyof typeof PATCHES

interface PatchRun extends LoadResult {
  kind: PatchKind
  /** CPU of the server and of the load generator during the measured run, as shares of one core. */
  cpu: Record<string, number>
  /** After the SIGKILL, in the run's range of ids: orders that show the patch, their `order.updated` events, their rows in the metadata index. */
  durable: number
  events: number
  indexRows: number
  /** Orders of the range whose metadata and rows in the metadata index disagree (one snapshot). */
  unindexed: number
}

let carts = 0

/**
 * An order's metadata as a storefront might hang it on: three keys, values of 20 characters each:
 * a customer of 1,000 (at random), a cart of its own (ascending), and the one channel.
 */
function placeMetadata(): Record<string, string> {
  return {
    customer: `cus_${String(Math.floor(Math.random() * 1000)).padStart(16, '0')}`,
    cart: `cart_${(carts++).toString(16).padStart(15, '0')}`,
    channel: 'web-storefront-eu-01',
  }
}

/**
 * Comparison 12, changing orders (issue: updateOrder's speed), on the big data set:
 * - 50 concurrent clients each patching distinct pending orders (PATCH /v2/store/orders/{id},
 *   `application/merge-patch+json`, 200), once adding a metadata key and once changing the quantity,
 *   against comparison 5's load, 50 clients cancelling distinct pending orders (DELETE, 204), on the
 *   same project server; target ≥ 0.9× each;
 * - 50 clients placing orders with three metadata keys against the same places without metadata
 *   (comparison 9's load); target ≥ 0.9×.
 * Paired rounds (lib/report.ts); every run on a fresh server, after its warm-up, SIGKILLed at its
 * end: every acknowledged change must be in the database, with its event (and, for metadata, its
 * rows in the metadata index, kept by the database's triggers).
 */
export async function updates(context: StoreContext): Promise<void> {
  await patches(context)
  await placesWithMetadata(context)
}

async function patches(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const section = context.report.section('12. Changes: PATCH of distinct orders, 50 concurrent clients', context.label, 'cancels (as in 5)')
  const kinds = Object.keys(PATCHES) as PatchKind[]
  // Each round cancels once and patches once of each kind, each run with orders of its own.
  const runs = ROUNDS * (1 + kinds.length)
  const perRun = Math.min(CHANGES_PER_RUN, Math.floor(big.pending.remaining() / runs) - WARMUP_CANCELS - 2 * CONNECTIONS)
  const rounds = await pairedRounds(
    ROUNDS,
    () => cancelRun(context, 'project server, cancels', 'lib/project-server.ts', perRun, {}, MAX_SECONDS),
    // The kinds in turns too, so that none always follows the other.
    async (round) => {
      const results = {} as Record<PatchKind, PatchRun>
      for (let i = 0; i < kinds.length; i++) {
        const kind = kinds[(i + round) % kinds.length]!
        results[kind] = await patchRun(context, kind, perRun)
      }
      return results
    },
  )
  const cancels = rounds.baseline
  const rate = (results: LoadResult[]): number => median(results.map((result) => result.perSecond))
  const serverUs = (result: LoadResult & { cpu: Record<string, number> }): number => (result.cpu.server! * result.seconds * 1e6) / result.requests
  const byKind = (kind: PatchKind): PatchRun[] => rounds.project.map((round) => round[kind])
  const ratios = Object.fromEntries(kinds.map((kind) => [kind, roundRatios(byKind(kind).map((r) => r.perSecond), cancels.map((r) => r.perSecond))])) as Record<PatchKind, RoundRatios>
  for (const kind of kinds) {
    section.rows.push({
      measure: `patches per second (200), ${PATCHES[kind].name}, ${ROUNDS} paired rounds`,
      project: fmt.rate(rate(byKind(kind)), 'patches/s'),
      baseline: fmt.rate(rate(cancels), 'cancels/s'),
      ratio: fmt.rounds(ratios[kind]),
      target: '≥ 0.9×',
      result: verdict(ratios[kind].median >= 0.9),
    })
  }
  const serverCost = (kind: PatchKind): RoundRatios => roundRatios(byKind(kind).map(serverUs), cancels.map(serverUs))
  section.rows.push(
    {
      measure: `the server's CPU per request (median of rounds): ${kinds.map((kind) => PATCHES[kind].name).join('; ')}`,
      project: kinds.map((kind) => `${median(byKind(kind).map(serverUs)).toFixed(0)} µs`).join('; '),
      baseline: `${median(cancels.map(serverUs)).toFixed(0)} µs`,
      ratio: kinds.map((kind) => fmt.rounds(serverCost(kind))).join('; '),
      result: 'info',
    },
    {
      measure: `latency p50 / p99 (last round): ${kinds.map((kind) => PATCHES[kind].name).join('; ')}`,
      project: kinds.map((kind) => `${byKind(kind).at(-1)!.p50Ms} / ${byKind(kind).at(-1)!.p99Ms} ms`).join('; '),
      baseline: `${cancels.at(-1)!.p50Ms} / ${cancels.at(-1)!.p99Ms} ms`,
      result: 'info',
    },
    {
      measure: 'CPU: server / load generator (of one core, last round)',
      project: kinds.map((kind) => cpuRow(byKind(kind).at(-1)!)).join('; '),
      baseline: cpuRow(cancels.at(-1)!),
      result: 'info',
    },
  )
  const patched = rounds.project.flatMap((round) => kinds.map((kind) => round[kind]))
  const acknowledged = sum(patched, (r) => r.ok)
  const metadataRuns = byKind('metadata')
  const patchesDurable = patched.every((r) => r.durable >= r.ok && r.events >= r.ok) && metadataRuns.every((r) => r.unindexed === 0)
  const cancelsDurable = cancels.every((r) => r.durable >= r.ok)
  section.rows.push({
    measure: 'durable after SIGKILL: patched orders, their order.updated events (metadata: its index rows, and orders whose index disagrees)',
    project: `${fmt.count(sum(patched, (r) => Math.min(r.durable, r.ok)))}, ${fmt.count(sum(patched, (r) => Math.min(r.events, r.ok)))} of ${fmt.count(acknowledged)} (index: ${fmt.count(sum(metadataRuns, (r) => r.indexRows))} of ${fmt.count(sum(metadataRuns, (r) => r.durable))}, ${fmt.count(sum(metadataRuns, (r) => r.unindexed))} disagreeing)`,
    baseline: `${fmt.count(sum(cancels, (r) => Math.min(r.durable, r.ok)))} of ${fmt.count(sum(cancels, (r) => r.ok))} cancels`,
    target: 'all',
    result: verdict(patchesDurable && cancelsDurable),
  })
  const list = (results: LoadResult[]): string => results.map((r) => `${fmt.count(r.requests)} in ${r.seconds.toFixed(2)} s`).join(', ')
  section.notes.push(
    `Runs: ${kinds.map((kind) => `${PATCHES[kind].name} ${list(byKind(kind))}`).join('; ')}; cancels ${list(cancels)} (each on a fresh server, after ${fmt.count(WARMUP_PATCHES)} warm-up requests of its own kind, at most ${fmt.count(perRun)} measured or ${MAX_SECONDS} s, then SIGKILLed); ratios ${kinds.map((kind) => fmt.roundList(ratios[kind])).join(' and ')}.`,
    `Patches: ${kinds.map((kind) => `\`${JSON.stringify(PATCHES[kind].patch)}\``).join(' and ')} as \`application/merge-patch+json\`, without If-Match, each to a pending order of the data set (no metadata, quantity 1–5) that no other run touches; cancels are comparison 5's load (\`DELETE /v1/store/orders/{id}\`), same ids drawn the same way.`,
    context.kind === 'sqlite'
      ? 'synchronous=FULL in WAL mode: every COMMIT syncs the WAL before its answers are sent.'
      : 'PostgreSQL with synchronous_commit=on (its default) and DATABASE_POOL_SIZE=10 (the default).',
  )
}

/** One run of `kind` on a fresh server, as cancelRun: warm-up patches, then `amount` measured, then SIGKILL and the counts. */
async function patchRun(context: StoreContext, kind: PatchKind, amount: number): Promise<PatchRun> {
  const big = context.big!
  const name = `project server, patches: ${PATCHES[kind].name}`
  if (amount < 2 * CONNECTIONS) throw new Error(`too few pending orders left for ${name}: use a larger BENCH_ORDERS`)
  const server = await startServerChild(name, 'lib/project-server.ts', { DATABASE_URL: big.database.url, ...PROJECT_ENV })
  const load = { origin: server.url, headers: bearer(big.secret), patch: PATCHES[kind].patch, connections: CONNECTIONS }
  try {
    requireAllOk(`${name} warm-up`, await patchLoad({ ...load, ids: big.pending.take(WARMUP_PATCHES + CONNECTIONS), maxSeconds: 60 }))
    const ids = big.pending.take(amount + CONNECTIONS)
    const measured = await cpuDuring({ server: server.child.pid, client: 'self' }, () => patchLoad({ ...load, ids, maxSeconds: MAX_SECONDS }))
    const result = requireAllOk(name, measured.result)
    // No graceful shutdown: whatever was acknowledged must already be on disk.
    await server.child.kill()
    const range = [ids[0]!, result.lastIdDrawn]
    const shows = kind === 'metadata' ? 'metadata IS NOT NULL' : `quantity = ${PATCHES.quantity.patch.quantity}`
    const durable = await count(big.database, `SELECT count(*) FROM orders WHERE id BETWEEN ? AND ? AND ${shows}`, range)
    const events = await count(big.database, `SELECT count(*) FROM order_events WHERE type = 'order.updated' AND order_id BETWEEN ? AND ?`, range)
    const indexRows = kind === 'metadata' ? await count(big.database, `SELECT count(*) FROM order_metadata WHERE key = 'note' AND order_id BETWEEN ? AND ?`, range) : 0
    // In one statement, so in one snapshot: a batch the killed server had sent may still commit
    // between the counts above (its backend finishes the statement), never inside this one.
    const unindexed =
      kind === 'metadata'
        ? await count(
            big.database,
            `SELECT count(*) FROM orders o WHERE o.id BETWEEN ? AND ? AND (o.metadata IS NOT NULL) <> EXISTS (SELECT 1 FROM order_metadata m WHERE m.key = 'note' AND m.value = ? AND m.order_id = o.id)`,
            [...range, PATCHES.metadata.patch.metadata.note],
          )
        : 0
    return { ...result, kind, cpu: measured.cores, durable, events, indexRows, unindexed }
  } finally {
    await server.child.kill()
  }
}

async function placesWithMetadata(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const section = context.report.section('12. Places with metadata, 50 concurrent clients', context.label, 'the same places without')
  const markers = new Map<PlaceRun, number>()
  const run = async (name: string, variant: Variant): Promise<PlaceRun> => {
    const marker = markerPet()
    const result = await placeRun(context, name, 'lib/project-server.ts', PLACES_PER_RUN, marker, variant)
    markers.set(result, marker)
    return result
  }
  const rounds = await pairedRounds(
    ROUNDS,
    () => run('project server, places', {}),
    () => run('project server, places with metadata', { metadata: placeMetadata }),
  )
  const plain = rounds.baseline
  const withMetadata = rounds.project
  const rate = (results: PlaceRun[]): number => median(results.map((result) => result.perSecond))
  const ratio = roundRatios(withMetadata.map((r) => r.perSecond), plain.map((r) => r.perSecond))
  const serverCost = roundRatios(withMetadata.map((r) => r.serverUs), plain.map((r) => r.serverUs))
  // Each metadata run's orders have their three keys in the metadata index; the others none.
  const indexRows = await Promise.all(withMetadata.map((result) => metadataRowsOfPet(big.database, markers.get(result)!)))
  const all = [...plain, ...withMetadata]
  section.rows.push(
    {
      measure: `places per second (201), three metadata keys of 20 characters, ${ROUNDS} paired rounds`,
      project: fmt.rate(rate(withMetadata), 'places/s'),
      baseline: fmt.rate(rate(plain), 'places/s'),
      ratio: fmt.rounds(ratio),
      target: '≥ 0.9×',
      result: verdict(ratio.median >= 0.9),
    },
    {
      measure: "the server's CPU per place",
      project: `${median(withMetadata.map((r) => r.serverUs)).toFixed(0)} µs`,
      baseline: `${median(plain.map((r) => r.serverUs)).toFixed(0)} µs`,
      ratio: fmt.rounds(serverCost),
      result: 'info',
    },
    {
      measure: "the server's CPU per place by thread (median of runs; SQLite's writer is the WorkerThread), and the bytes it sent to storage a place",
      project: `${threadRow(withMetadata)}; ${fmt.count(Math.round(median(withMetadata.map((r) => r.storageBytes))))} bytes`,
      baseline: `${threadRow(plain)}; ${fmt.count(Math.round(median(plain.map((r) => r.storageBytes))))} bytes`,
      result: 'info',
    },
    {
      measure: 'latency p50 / p99 (last round)',
      project: `${withMetadata.at(-1)!.p50Ms} / ${withMetadata.at(-1)!.p99Ms} ms`,
      baseline: `${plain.at(-1)!.p50Ms} / ${plain.at(-1)!.p99Ms} ms`,
      result: 'info',
    },
    {
      measure: 'CPU: server / load generator (of one core, last round)',
      project: cpuRow(withMetadata.at(-1)!),
      baseline: cpuRow(plain.at(-1)!),
      result: 'info',
    },
    {
      measure: 'durable after SIGKILL (every run); metadata index rows of the places with metadata',
      project: `${fmt.count(sum(all, (r) => Math.min(r.durable, r.ok)))} of ${fmt.count(sum(all, (r) => r.ok))} acknowledged; ${fmt.count(sum(indexRows, (n) => n))} index rows for ${fmt.count(sum(withMetadata, (r) => r.durable))} orders`,
      target: 'all; 3 a place',
      result: verdict(all.every((r) => r.durable >= r.ok) && withMetadata.every((r, i) => indexRows[i] === 3 * r.durable)),
    },
  )
  const list = (results: PlaceRun[]): string => results.map((r) => `${fmt.count(r.requests)} in ${r.seconds.toFixed(2)} s`).join(', ')
  section.notes.push(
    `Runs: with metadata ${list(withMetadata)}; without ${list(plain)} (each on a fresh server, after ${fmt.count(WARMUP_PLACES)} warm-up places of its own kind, at most ${fmt.count(PLACES_PER_RUN)} measured or ${MAX_SECONDS} s, then SIGKILLed); ratios ${fmt.roundList(ratio)}.`,
    'Every request is built anew with an X-Bench-Nonce (as in 9, no Idempotency-Key); with metadata, its body too, each order with `customer` (one of 1,000 at random), `cart` (its own, ascending) and `channel` (the same for all), each value 20 characters: 3 rows in the metadata index per place.',
  )
}

/** Rows in the metadata index of the orders of pet `petId` (a run's marker). */
function metadataRowsOfPet(database: BenchDatabase, petId: number): Promise<number> {
  return count(database, 'SELECT count(*) FROM order_metadata m JOIN orders o ON o.id = m.order_id WHERE o.pet_id = ?', [petId])
}

/** `database.count` with `?` parameters on both stores. */
function count(database: BenchDatabase, sql: string, params: (number | string)[]): Promise<number> {
  let n = 0
  return database.count(database.kind === 'sqlite' ? sql : sql.replace(/\?/g, () => `$${++n}`), params)
}

/** Each thread's median µs a place over the runs, the busiest first; those under 2 µs left out. */
function threadRow(runs: PlaceRun[]): string {
  const threads = [...new Set(runs.flatMap((run) => Object.keys(run.threadUs)))]
  const medians = threads.map((thread) => [thread, median(runs.map((run) => run.threadUs[thread] ?? 0))] as const)
  return medians
    .filter(([, us]) => us >= 2)
    .sort((a, b) => b[1] - a[1])
    .map(([thread, us]) => `${thread} ${us.toFixed(0)} µs`)
    .join(', ')
}

function cpuRow(result: { cpu: Record<string, number> }): string {
  return `${Math.round(result.cpu.server! * 100)}% / ${Math.round(result.cpu.client! * 100)}%`
}

function sum<T>(results: T[], of: (result: T) => number): number {
  return results.reduce((total, result) => total + of(result), 0)
}
