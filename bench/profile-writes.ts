/**
 * Where the project server's CPU goes for one kind of write, as comparison 12 loads it: a fresh
 * database of `orders` orders (the bench's data set), a project server child under `--cpu-prof`,
 * 50 clients sending `count` requests of each kind asked (after 1,000 warm-up requests), one server
 * per kind (compiled first, as `npm run bench` compiles them). For each kind it prints the server's
 * CPU per request from /proc and, from V8's profile, the functions with the most self time and the
 * project's functions with the most total time, in µs a request. Compare two kinds to see where the
 * difference goes.
 *
 *   node --import tsx bench/profile-writes.ts [sqlite|postgres] [kinds, e.g. place,place-metadata] [count] [orders]
 *
 * PROFILE_SQL: bench-only SQL run on the database after the seed, before any server starts, to see
 * what a change of schema would change (e.g. PROFILE_SQL='DROP TRIGGER orders_metadata_inserted').
 *
 * Kinds: place, place-key-v7 / place-key-v4 / place-key-counter (an Idempotency-Key on each, as
 * comparison 9 sends them), place-metadata (three keys of 20 characters, as comparison 12: a customer of 1,000
 * at random, a cart of its own, the one channel), place-metadata-ascending (the same but every
 * value ascending or constant: the index's rows all at its ends), cancel,
 * patch-metadata (one key added), patch-quantity. Profiles are left in .bench/profiles/.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { bearer } from './lib/client.js'
import { compileBench } from './lib/compile.js'
import { dropAllDatabases, storeKind } from './lib/databases.js'
import { PendingIds, PETS } from './lib/dataset.js'
import { cancelLoad, patchLoad, placeLoad, requireAllOk, type LoadResult } from './lib/load.js'
import { ROOT } from './lib/paths.js'
import { cpuDuring, cpuSeconds } from './lib/proc.js'
import { Child, killAllChildren, PROJECT_ENV } from './lib/processes.js'
import { createDatabase, seed } from './suites/context.js'

const KINDS = [
  'place',
  'place-key-v7',
  'place-key-v4',
  'place-key-counter',
  'place-metadata',
  'place-metadata-ascending',
  'cancel',
  'patch-metadata',
  'patch-quantity',
] as const
type Kind = (typeof KINDS)[number]

const store = storeKind(process.argv[2] ?? 'sqlite', 'the store (the first argument)')
const kinds = (process.argv[3] ?? 'place,place-metadata').split(',') as Kind[]
const count = Number(process.argv[4] ?? 20_000)
const orders = Number(process.argv[5] ?? 200_000)
const CONNECTIONS = 50
const WARMUP = 1_000
for (const kind of kinds) if (!KINDS.includes(kind)) throw new Error(`unknown kind "${kind}" (known: ${KINDS.join(', ')})`)

let cart = 0
const metadata = (): Record<string, string> => ({
  customer: `cus_${String(Math.floor(Math.random() * 1000)).padStart(16, '0')}`,
  cart: `cart_${(cart++).toString(16).padStart(15, '0')}`,
  channel: 'web-storefront-eu-01',
})

const ascending = (): Record<string, string> => ({
  customer: 'cus_0000000000000042',
  cart: `cart_${(cart++).toString(16).padStart(15, '0')}`,
  channel: 'web-storefront-eu-01',
})

/** The PostgreSQL backends serving database `url` names (their command line names the database). */
function backendsOf(url: string): number[] {
  const name = new URL(url).pathname.slice(1)
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(` ${name} `)) pids.push(Number(entry))
    } catch {
      // gone
    }
  }
  return pids
}

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** Self and total µs per function (name and place), from a .cpuprofile. */
function summarize(profile: Profile): { self: Map<string, number>; total: Map<string, number>; allUs: number } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const selfUs = new Map<number, number>()
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const name = (node: ProfileNode): string => {
    const { functionName, url, lineNumber } = node.callFrame
    const file = url.replace(/^file:\/\//, '').replace(`${ROOT}.bench/build/`, '').replace(/^.*node_modules\//, '')
    return `${functionName || '(anonymous)'} ${file === '' ? '' : `${file}:${lineNumber + 1}`}`.trim()
  }
  const self = new Map<string, number>()
  const total = new Map<string, number>()
  let allUs = 0
  // Total time of a function counts each sample once, however deep it recurses.
  const walk = (id: number, onStack: Set<string>): number => {
    const node = byId.get(id)!
    const key = name(node)
    const own = selfUs.get(id) ?? 0
    self.set(key, (self.get(key) ?? 0) + own)
    allUs += own
    let sum = own
    const entered = !onStack.has(key)
    if (entered) onStack.add(key)
    for (const child of node.children ?? []) sum += walk(child, onStack)
    if (entered) {
      onStack.delete(key)
      total.set(key, (total.get(key) ?? 0) + sum)
    }
    return sum
  }
  walk(profile.nodes[0]!.id, new Set())
  return { self, total, allUs }
}

compileBench()
const database = await createDatabase(store)
const profiles = join(ROOT, '.bench', 'profiles')
mkdirSync(profiles, { recursive: true })
try {
  const seeded = await seed(database, orders, { pets: PETS, key: true })
  if (process.env.PROFILE_SQL !== undefined) await database.execute(process.env.PROFILE_SQL)
  const headers = bearer(seeded.secret!)
  const pending = new PendingIds(orders)
  let marker = 9_100_000_000_000
  for (const kind of kinds) {
    const dir = join(profiles, `${store}-${kind}`)
    rmSync(dir, { recursive: true, force: true })
    const child = new Child(`project server (${kind})`, 'lib/project-server.ts', {
      env: { HOST: '127.0.0.1', PORT: '0', DATABASE_URL: database.url, ...PROJECT_ENV },
      nodeOptions: ['--cpu-prof', `--cpu-prof-dir=${dir}`],
    })
    const { url } = await child.next<{ type: 'ready'; url: string }>('ready', 60_000)
    const load = async (amount: number): Promise<LoadResult> => {
      const common = { origin: url, headers, connections: CONNECTIONS, maxSeconds: 120 }
      switch (kind) {
        case 'place':
          return placeLoad({ ...common, petId: marker++, amount })
        case 'place-key-v7':
          return placeLoad({ ...common, petId: marker++, amount, idempotencyKeys: 7 })
        case 'place-key-v4':
          return placeLoad({ ...common, petId: marker++, amount, idempotencyKeys: 4 })
        case 'place-key-counter':
          return placeLoad({ ...common, petId: marker++, amount, idempotencyKeys: 'counter' })
        case 'place-metadata':
          return placeLoad({ ...common, petId: marker++, amount, metadata })
        case 'place-metadata-ascending':
          return placeLoad({ ...common, petId: marker++, amount, metadata: ascending })
        case 'cancel':
          return cancelLoad({ ...common, ids: pending.take(amount + CONNECTIONS) })
        case 'patch-metadata':
          return patchLoad({ ...common, ids: pending.take(amount + CONNECTIONS), patch: { metadata: { note: 'gift-wrap-and-a-card' } } })
        case 'patch-quantity':
          return patchLoad({ ...common, ids: pending.take(amount + CONNECTIONS), patch: { quantity: 9 } })
      }
    }
    requireAllOk(`${kind} warm-up`, await load(WARMUP))
    // PostgreSQL's side: its backends for this database (the pool's connections, made in the warm-up).
    const backends = store === 'postgres' ? backendsOf(database.url) : []
    const backendsBefore = backends.reduce((sum, pid) => sum + cpuSeconds(pid), 0)
    const measured = await cpuDuring({ server: child.pid }, () => load(count))
    const backendUs = ((backends.reduce((sum, pid) => sum + cpuSeconds(pid), 0) - backendsBefore) * 1e6) / measured.result.requests
    const result = requireAllOk(kind, measured.result)
    await child.stop()
    // One profile a thread: the main thread's, and SQLite's writer thread's.
    const files = readdirSync(dir).filter((name) => name.endsWith('.cpuprofile')).sort()
    if (files.length === 0) throw new Error(`no profile written in ${dir}`)
    // The profile covers the warm-up and the server's start too: per request over both loads.
    const requests = WARMUP + result.requests
    const per = (us: number): string => (us / requests).toFixed(1).padStart(7)
    console.log(`\n## ${store} ${kind}: ${result.requests} requests at ${Math.round(result.perSecond)}/s; server CPU ${((measured.cpuSeconds.server! * 1e6) / result.requests).toFixed(0)} µs a request (/proc)${store === 'postgres' ? `, PostgreSQL's ${backends.length} backends ${backendUs.toFixed(0)} µs` : ''}`)
    for (const file of files) {
      const { self, total, allUs } = summarize(JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile)
      console.log(`### ${file}: ${per(allUs).trim()} µs a request over ${requests}\nself time, µs a request:`)
      for (const [key, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${per(us)}  ${key}`)
      console.log("the project's functions by total time, µs a request:")
      for (const [key, us] of [...total].filter(([key]) => / src\//.test(key)).sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${per(us)}  ${key}`)
    }
  }
} finally {
  killAllChildren()
  await dropAllDatabases()
}
