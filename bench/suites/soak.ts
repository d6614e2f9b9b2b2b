import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { Agent, request, type IncomingHttpHeaders } from 'node:http'
import { promisify } from 'node:util'
import { brotliDecompress, gunzip } from 'node:zlib'
import { mulberry32 } from '../../src/demo/demo-data.js'
import { bearer } from '../lib/client.js'
import { isCancelled, isPending, isShipped } from '../lib/dataset.js'
import { positiveInteger } from '../lib/env.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { cpuSeconds } from '../lib/proc.js'
import { fmt, verdict } from '../lib/report.js'
import { createDatabase, seed, type StoreContext } from './context.js'

/** SOAK_SECONDS: length of the mixed load (default 3 minutes). */
const DEFAULT_SECONDS = 180
/** SOAK_ORDERS: orders seeded before the load (by import, untimed). */
const DEFAULT_ORDERS = 20_000
const CLIENTS = 8
/** RSS of the server is read this often. */
const SAMPLE_MS = 2_000
/** Warm-up: the start figure is read from this share of the run to twice it; the end figure from its last share. */
const WARMUP_SHARE = 0.1
/** The run also stops after this many requests per second of SOAK_SECONDS: a bound in requests too. */
const MAX_REQUESTS_PER_SECOND = 20_000
/** A request not answered within this is counted as an error and its connection dropped. */
const REQUEST_TIMEOUT_MS = 30_000
/** Only this share of the pending orders is cancelled, spread evenly over the run. */
const PENDING_SHARE = 0.9
/** One compressed list in this many is decompressed and checked. */
const DECODE_EVERY = 10
const MIB = 1024 * 1024

const decoders = { gzip: promisify(gunzip), br: promisify(brotliDecompress) }

interface Outcome {
  status: number
  headers: IncomingHttpHeaders
  bytes: number
  /** First and last byte of the body (-1 when empty). */
  first: number
  last: number
  /** The whole body, when it was asked for (small bodies, sampled compressed lists). */
  body?: Buffer
}

interface Planned {
  /** Set when the request is of another kind than the one drawn (a paced cancel's fallback). */
  kind?: string
  method: string
  path: string
  headers: Record<string, string>
  body?: string
  keepBody: boolean
  /** Undefined when the answer is what this request should get; else what is wrong with it. */
  check(outcome: Outcome): Promise<string | undefined> | string | undefined
}

function send(agent: Agent, origin: string, planned: Planned): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...planned.headers }
    if (planned.body !== undefined) headers['content-length'] = String(Buffer.byteLength(planned.body))
    const req = request(`${origin}${planned.path}`, { method: planned.method, headers, agent }, (res) => {
      let bytes = 0
      let first = -1
      let last = -1
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => {
        if (bytes === 0 && chunk.length > 0) first = chunk[0]!
        if (chunk.length > 0) last = chunk[chunk.length - 1]!
        bytes += chunk.length
        if (planned.keepBody) chunks.push(chunk)
      })
      res.on('error', reject)
      res.on('close', () => {
        if (!res.complete) reject(new Error('response cut short'))
      })
      res.on('end', () => {
        const outcome: Outcome = { status: res.statusCode ?? 0, headers: res.headers, bytes, first, last }
        if (planned.keepBody) outcome.body = Buffer.concat(chunks)
        resolve(outcome)
      })
    })
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)))
    req.on('error', reject)
    req.end(planned.body)
  })
}

/** Checks an Error response: JSON with exactly code, message and status; the status and code expected. */
function errorProblem(outcome: Outcome, code: string): string | undefined {
  let body: unknown
  try {
    body = JSON.parse(outcome.body?.toString('utf8') ?? '')
  } catch {
    return `not a JSON Error body: ${JSON.stringify(outcome.body?.toString('utf8').slice(0, 80))}`
  }
  const fields = body !== null && typeof body === 'object' ? Object.keys(body).sort().join(',') : ''
  if (fields !== 'code,message,status') return `not an Error body: ${JSON.stringify(body).slice(0, 120)}`
  const error = body as { code: unknown; status: unknown; message: unknown }
  if (error.status !== outcome.status) return `Error body says status ${String(error.status)}`
  if (error.code !== code) return `code ${String(error.code)}, expected ${code}`
  if (typeof error.message !== 'string' || error.message === '') return 'Error body without a message'
  if (!String(outcome.headers['content-type']).startsWith('application/json')) return `Error with Content-Type ${outcome.headers['content-type']}`
  return undefined
}

function expectError(status: number, code: string, header?: string): (outcome: Outcome) => string | undefined {
  return (outcome) => {
    if (outcome.status !== status) return `status ${outcome.status}, expected ${status}`
    if (header !== undefined && outcome.headers[header] === undefined) return `${status} without ${header}`
    return errorProblem(outcome, code)
  }
}

function isJsonArray(outcome: Outcome): boolean {
  return outcome.first === 0x5b && outcome.last === 0x5d // '[' … ']'
}

/** What the clients share: the ids they draw from, the ETag last seen, and every count. */
class SoakState {
  readonly byStatus = new Map<number, number>()
  readonly byKind = new Map<string, number>()
  readonly unexpected: string[] = []
  unexpectedCount = 0
  requests = 0
  acknowledgedCancels = 0
  /** The identity list's ETag as last seen: what the conditional GETs send. */
  etag: string | undefined
  private readonly pending: number[] = []
  private nextPending = 0
  private readonly cancelled: number[] = []
  private readonly shipped: number[] = []
  private compressedLists = 0

  constructor(
    readonly orders: number,
    private readonly started: number,
    private readonly durationMs: number,
  ) {
    for (let id = 1; id <= orders; id++) {
      if (isPending(id)) this.pending.push(id)
      else if (isShipped(id)) this.shipped.push(id)
    }
    // Cancel the pending orders in a shuffled order (deterministic), not by ascending id.
    const shuffle = mulberry32(7) // seeded: every run sends the same mix
    for (let i = this.pending.length - 1; i > 0; i--) {
      const j = Math.floor(shuffle() * (i + 1))
      ;[this.pending[i], this.pending[j]] = [this.pending[j]!, this.pending[i]!]
    }
    this.pending.length = Math.floor(this.pending.length * PENDING_SHARE)
  }

  /** A pending order to cancel, when the pacing allows one now: the pool lasts the whole run. */
  takePending(): number | undefined {
    const allowed = Math.floor((this.pending.length * (performance.now() - this.started)) / this.durationMs)
    if (this.nextPending >= Math.min(allowed, this.pending.length)) return undefined
    return this.pending[this.nextPending++]
  }

  pendingTaken(): number {
    return this.nextPending
  }

  anyCancelled(pick: number): number | undefined {
    return this.cancelled.length === 0 ? undefined : this.cancelled[Math.floor(pick * this.cancelled.length)]
  }

  anyShipped(pick: number): number {
    return this.shipped[Math.floor(pick * this.shipped.length)]!
  }

  cancelledNow(id: number): void {
    this.cancelled.push(id)
    this.acknowledgedCancels++
  }

  /** True once in DECODE_EVERY compressed lists. */
  decodeThisOne(): boolean {
    return this.compressedLists++ % DECODE_EVERY === 0
  }

  count(kind: string, status: number): void {
    this.requests++
    this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1)
    this.byStatus.set(status, (this.byStatus.get(status) ?? 0) + 1)
  }

  fault(what: string): void {
    this.unexpectedCount++
    if (this.unexpected.length < 10) this.unexpected.push(what)
  }
}

type Kind = {
  name: string
  weight: number
  plan(state: SoakState, pick: () => number, auth: Record<string, string>): Planned
}

const BAD_IDS = ['abc', '1.5', '9223372036854775808', '-9223372036854775809', '0x10', '1e3', '%2B1', '-', '%20']
const UNKNOWN_PATHS = ['/v1/store/order', '/v1/store/orders/1/items', '/v2/store/order', '/v1/nothing', '/store/orders']
const WRONG_METHODS: [string, string, string][] = [
  ['POST', '/v1/store/orders', 'GET, HEAD, OPTIONS'],
  ['PUT', '/v1/store/orders', 'GET, HEAD, OPTIONS'],
  ['PATCH', '/v1/store/orders/8', 'DELETE, OPTIONS'],
  ['PUT', '/v1/store/orders/8', 'DELETE, OPTIONS'],
  ['GET', '/v1/store/orders/8', 'DELETE, OPTIONS'],
]

function listRequest(state: SoakState, auth: Record<string, string>, encoding: 'identity' | 'gzip' | 'br', conditional: boolean): Planned {
  const headers: Record<string, string> = { ...auth }
  if (encoding !== 'identity') headers['accept-encoding'] = encoding
  const sentEtag = conditional ? (state.etag ?? '"none"') : undefined
  if (sentEtag !== undefined) headers['if-none-match'] = sentEtag
  const decode = encoding !== 'identity' && state.decodeThisOne()
  return {
    method: 'GET',
    path: '/v1/store/orders',
    headers,
    keepBody: decode,
    async check(outcome) {
      if (conditional && outcome.status === 304) return outcome.bytes === 0 ? undefined : '304 with a body'
      if (outcome.status !== 200) return `status ${outcome.status}, expected 200${conditional ? ' or 304' : ''}`
      const etag = outcome.headers.etag
      if (etag === undefined) return '200 without ETag'
      if (conditional && etag === sentEtag) return `200 for If-None-Match ${sentEtag}, which is its current ETag`
      const coding = outcome.headers['content-encoding'] ?? 'identity'
      if (coding !== encoding) return `Content-Encoding ${coding}, asked for ${encoding}`
      if (encoding === 'identity') {
        state.etag = etag
        return isJsonArray(outcome) ? undefined : 'the list is not a JSON array'
      }
      if (decode) {
        const text = (await decoders[encoding](outcome.body!)).toString('utf8')
        if (!text.startsWith('[') || !text.endsWith(']')) return `the ${encoding} list does not decode to a JSON array`
      }
      return outcome.bytes > 0 ? undefined : 'an empty list body'
    },
  }
}

/** The mix each client draws from, by weight (of 100). */
const KINDS: Kind[] = [
  { name: 'list', weight: 20, plan: (state, _pick, auth) => listRequest(state, auth, 'identity', false) },
  { name: 'list, If-None-Match', weight: 12, plan: (state, _pick, auth) => listRequest(state, auth, 'identity', true) },
  { name: 'list, gzip', weight: 6, plan: (state, _pick, auth) => listRequest(state, auth, 'gzip', false) },
  { name: 'list, br', weight: 6, plan: (state, _pick, auth) => listRequest(state, auth, 'br', false) },
  {
    name: 'cancel pending',
    weight: 20,
    plan(state, pick, auth) {
      const id = state.takePending()
      // Paced: when the run is ahead of its share of pending orders, cancel a cancelled one instead.
      if (id === undefined) return { ...KINDS.find((kind) => kind.name === 'cancel cancelled')!.plan(state, pick, auth), kind: 'cancel cancelled' }
      return {
        method: 'DELETE',
        path: `/v1/store/orders/${id}`,
        headers: auth,
        keepBody: true,
        check(outcome) {
          if (outcome.status !== 204) return `cancel of pending order ${id}: status ${outcome.status}, expected 204`
          if (outcome.bytes !== 0) return '204 with a body'
          state.cancelledNow(id)
          return undefined
        },
      }
    },
  },
  {
    name: 'cancel cancelled',
    weight: 6,
    plan(state, pick, auth) {
      // Before any cancel is acknowledged: an id past the data set, unknown (404 too).
      const id = state.anyCancelled(pick()) ?? state.orders + 1 + Math.floor(pick() * 1000)
      return { method: 'DELETE', path: `/v1/store/orders/${id}`, headers: auth, keepBody: true, check: expectError(404, 'order_not_found') }
    },
  },
  {
    name: 'cancel shipped',
    weight: 6,
    plan: (state, pick, auth) => ({
      method: 'DELETE',
      path: `/v1/store/orders/${state.anyShipped(pick())}`,
      headers: auth,
      keepBody: true,
      check: expectError(409, 'order_already_shipped'),
    }),
  },
  {
    name: 'bad id',
    weight: 6,
    plan: (_state, pick, auth) => ({
      method: 'DELETE',
      path: `/v1/store/orders/${BAD_IDS[Math.floor(pick() * BAD_IDS.length)]!}`,
      headers: auth,
      keepBody: true,
      check: expectError(400, 'invalid_order_id'),
    }),
  },
  {
    name: 'no key',
    weight: 5,
    plan: (state, pick) =>
      pick() < 0.5
        ? { method: 'GET', path: '/v1/store/orders', headers: {}, keepBody: true, check: expectError(401, 'unauthorized', 'www-authenticate') }
        : { method: 'DELETE', path: `/v1/store/orders/${state.anyShipped(pick())}`, headers: {}, keepBody: true, check: expectError(401, 'unauthorized', 'www-authenticate') },
  },
  {
    name: 'unknown path',
    weight: 5,
    plan: (_state, pick, auth) => ({
      method: 'GET',
      path: UNKNOWN_PATHS[Math.floor(pick() * UNKNOWN_PATHS.length)]!,
      headers: auth,
      keepBody: true,
      check: expectError(404, 'not_found'),
    }),
  },
  {
    name: 'wrong method',
    weight: 4,
    plan(_state, pick, auth) {
      const [method, path, allow] = WRONG_METHODS[Math.floor(pick() * WRONG_METHODS.length)]!
      return {
        method,
        path,
        headers: auth,
        keepBody: true,
        check(outcome) {
          const problem = expectError(405, 'method_not_allowed', 'allow')(outcome)
          if (problem !== undefined) return problem
          return outcome.headers.allow === allow ? undefined : `Allow: ${outcome.headers.allow}, expected ${allow}`
        },
      }
    },
  },
  {
    name: 'malformed JSON body',
    weight: 4,
    // At a shipped order: were the body ignored, the answer would be 409, not 400.
    plan: (state, pick, auth) => ({
      method: 'DELETE',
      path: `/v1/store/orders/${state.anyShipped(pick())}`,
      headers: { ...auth, 'content-type': 'application/json' },
      body: ['{oops', '{"a":', '[1,2', '"unterminated', '{"__proto__":'][Math.floor(pick() * 5)]!,
      keepBody: true,
      check: expectError(400, 'invalid_body'),
    }),
  },
]

function drawKind(pick: number): Kind {
  const total = KINDS.reduce((sum, kind) => sum + kind.weight, 0)
  let point = pick * total
  for (const kind of KINDS) {
    point -= kind.weight
    if (point < 0) return kind
  }
  return KINDS.at(-1)!
}

/** Least-squares slope of y over x. */
function slope(points: [number, number][]): number {
  const n = points.length
  if (n < 2) return 0
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / n
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / n
  let num = 0
  let den = 0
  for (const [x, y] of points) {
    num += (x - meanX) * (y - meanY)
    den += (x - meanX) ** 2
  }
  return den === 0 ? 0 : num / den
}

/** Open file descriptors of a process: how many, and how many of them are sockets. */
function openFiles(pid: number): { all: number; sockets: number; targets: string[] } {
  const targets: string[] = []
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      targets.push(readlinkSync(`/proc/${pid}/fd/${fd}`))
    } catch {
      // closed meanwhile
    }
  }
  return { all: targets.length, sockets: targets.filter((target) => target.startsWith('socket:')).length, targets }
}

/**
 * Client connections the server still holds: its TCP sockets on its own port, other than the
 * listening one, from /proc/<pid>/net/tcp{,6} matched to its file descriptors.
 */
function serverConnections(pid: number, port: number, files: { targets: string[] }): number {
  const inodes = new Set(files.targets.map((target) => /^socket:\[(\d+)\]$/.exec(target)?.[1]).filter((inode) => inode !== undefined))
  let count = 0
  for (const table of ['tcp', 'tcp6']) {
    let text: string
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/)
      if (fields.length < 10) continue
      const localPort = parseInt(fields[1]!.split(':')[1]!, 16)
      const listening = fields[3] === '0A'
      if (localPort === port && !listening && inodes.has(fields[9]!)) count++
    }
  }
  return count
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/**
 * Soak (reliability): the project's server under a bounded mixed closed-loop load for SOAK_SECONDS
 * — full lists (plain, conditional, gzip, br), cancels of pending, cancelled and shipped orders, and
 * bad requests — with its RSS read every few seconds. Memory must be flat and every answer must be
 * the one its request should get.
 */
export async function soak(context: StoreContext): Promise<void> {
  const seconds = positiveInteger('SOAK_SECONDS') ?? DEFAULT_SECONDS
  const orders = positiveInteger('SOAK_ORDERS') ?? DEFAULT_ORDERS
  const durationMs = seconds * 1000
  const maxRequests = MAX_REQUESTS_PER_SECOND * seconds
  const section = context.report.section(`Soak: mixed load, ${CLIENTS} clients`, context.label, '')
  const database = await createDatabase(context.kind)
  try {
    console.log(`  seeding ${fmt.count(orders)} orders (untimed) …`)
    const { secret } = await seed(database, orders, { pets: 0, key: true })
    const auth = bearer(secret!)
    // Rate limits count every request but never refuse one: the single key, and the no-key
    // requests' failed authentications from 127.0.0.1.
    const server = await startServerChild('project server', 'lib/project-server.ts', {
      DATABASE_URL: database.url,
      ...PROJECT_ENV,
      RATE_LIMIT_AUTH_FAILURES: '10000000',
    })
    const pid = server.child.pid
    const port = Number(new URL(server.url).port)
    let exited = false
    void server.child.exited.then(() => (exited = true))
    const idleRss = server.child.memory().rss
    const filesBefore = openFiles(pid)
    const samples: [number, number][] = [] // [ms since the start, RSS bytes]
    const agents = Array.from({ length: CLIENTS }, () => new Agent({ keepAlive: true, maxSockets: 1, timeout: 4000 })) // see probe.ts
    let state: SoakState
    let elapsedMs: number
    let cpu: { server: number; client: number }
    let stoppedBy: 'time' | 'requests'
    try {
      const started = performance.now()
      state = new SoakState(orders, started, durationMs)
      const cpuBefore = { server: cpuSeconds(pid), client: cpuSeconds('self') }
      const sampler = setInterval(() => {
        if (exited) return
        const at = performance.now() - started
        samples.push([at, server.child.memory().rss])
        if (samples.length % Math.round(30_000 / SAMPLE_MS) === 0) {
          console.log(`  ${(at / 1000).toFixed(0)} s: ${fmt.count(state.requests)} requests, server RSS ${fmt.mib(samples.at(-1)![1])}, ${state.unexpectedCount} unexpected`)
        }
      }, SAMPLE_MS)
      samples.push([0, server.child.memory().rss])
      const running = (): boolean => !exited && performance.now() - started < durationMs && state.requests < maxRequests
      const clients = agents.map(async (agent, index) => {
        const pick = mulberry32(1000 + index)
        while (running()) {
          const kind = drawKind(pick())
          const planned = kind.plan(state, pick, auth)
          const name = planned.kind ?? kind.name
          let problem: string | undefined
          try {
            const outcome = await send(agent, server.url, planned)
            state.count(name, outcome.status)
            problem = outcome.status >= 500 ? `${outcome.status}: ${outcome.body?.toString('utf8').slice(0, 120) ?? ''}` : await planned.check(outcome)
          } catch (error) {
            state.count(name, 0)
            problem = `no answer: ${(error as Error).message}`
          }
          if (problem !== undefined) state.fault(`${name} (${planned.method} ${planned.path}): ${problem}`)
        }
      })
      await Promise.all(clients)
      elapsedMs = performance.now() - started
      clearInterval(sampler)
      if (exited) throw new Error(`the server exited during the soak, after ${fmt.count(state.requests)} requests (${state.unexpected.join(' | ')})`)
      samples.push([elapsedMs, server.child.memory().rss])
      cpu = {
        server: (cpuSeconds(pid) - cpuBefore.server) / (elapsedMs / 1000),
        client: (cpuSeconds('self') - cpuBefore.client) / (elapsedMs / 1000),
      }
      stoppedBy = state.requests >= maxRequests ? 'requests' : 'time'
    } finally {
      for (const agent of agents) agent.destroy()
    }

    let filesAfter: ReturnType<typeof openFiles>
    let connectionsAfter: number
    let peakRss: number
    let listed: number
    try {
      // The clients' connections are closed: let the server see it, then count its open files.
      await new Promise((resolve) => setTimeout(resolve, 1000))
      filesAfter = openFiles(pid)
      connectionsAfter = serverConnections(pid, port, filesAfter)
      peakRss = server.child.memory().peakRss
      listed = await countOrders(server.url, auth)
    } finally {
      await server.child.stop()
    }
    const cancelledInDatabase = await database.countCancelled(1, orders)
    // The data set comes with 1 in 50 orders cancelled; the run's cancels are those on top of them.
    let seededCancelled = 0
    for (let id = 1; id <= orders; id++) if (isCancelled(id)) seededCancelled++
    const cancelledByRun = cancelledInDatabase - seededCancelled

    // Figures.
    // Start: the samples from 10% to 20% of the run (after warm-up); end: those of its last 10%.
    // Medians of several samples, so that one garbage collection does not decide the verdict.
    const within = (from: number, to: number): number[] => {
      const values = samples.filter(([at]) => at >= from * elapsedMs && at <= to * elapsedMs).map(([, rss]) => rss)
      return values.length > 0 ? values : [samples.reduce((best, sample) => (Math.abs(sample[0] - from * elapsedMs) < Math.abs(best[0] - from * elapsedMs) ? sample : best))[1]]
    }
    const startRss = median(within(WARMUP_SHARE, 2 * WARMUP_SHARE))
    const endRss = median(within(1 - WARMUP_SHARE, 1))
    const maxRss = Math.max(...samples.map(([, rss]) => rss))
    const secondHalf = samples.filter(([at]) => at >= elapsedMs / 2).map(([at, rss]): [number, number] => [at / 60_000, rss / MIB])
    const mibPerMinute = slope(secondHalf)
    const limit = startRss * 1.1 + 16 * MIB
    const statuses = [...state.byStatus.entries()].sort(([a], [b]) => a - b)
    section.rows.push(
      {
        measure: `server RSS: start (${WARMUP_SHARE * 100}–${2 * WARMUP_SHARE * 100}% of the run) → end (last ${WARMUP_SHARE * 100}%)`,
        project: `${fmt.mib(startRss)} → ${fmt.mib(endRss)}`,
        ratio: fmt.ratio(endRss / startRss),
        target: '≤ start × 1.10 + 16 MiB',
        result: verdict(endRss <= limit),
      },
      {
        measure: 'server RSS: idle before the load / max sampled / peak (VmHWM)',
        project: `${fmt.mib(idleRss)} / ${fmt.mib(maxRss)} / ${fmt.mib(peakRss)}`,
        result: 'info',
      },
      {
        measure: 'RSS slope over the second half (least squares)',
        project: `${mibPerMinute >= 0 ? '+' : ''}${mibPerMinute.toFixed(2)} MiB/min`,
        result: 'info',
      },
      {
        measure: 'unexpected answers (5xx, wrong status or body, no answer)',
        project: `${fmt.count(state.unexpectedCount)} of ${fmt.count(state.requests)}`,
        target: '0',
        result: verdict(state.unexpectedCount === 0),
      },
      {
        measure: 'requests, throughput',
        project: `${fmt.count(state.requests)} in ${(elapsedMs / 1000).toFixed(0)} s, ${fmt.rate(state.requests / (elapsedMs / 1000))}`,
        result: 'info',
      },
      {
        measure: 'answers by status',
        project: statuses.map(([status, n]) => `${status === 0 ? 'none' : status}: ${fmt.count(n)}`).join(', '),
        result: 'info',
      },
      {
        measure: 'orders cancelled in the database by the run',
        project: `${fmt.count(cancelledByRun)} of the pending (${fmt.count(state.acknowledgedCancels)} acknowledged), ${fmt.count(seededCancelled)} cancelled in the data set`,
        target: '= the 204s',
        result: verdict(cancelledByRun === state.acknowledgedCancels),
      },
      {
        measure: 'orders in the list after the run',
        project: `${fmt.count(listed)} (${fmt.count(orders)} seeded − ${fmt.count(cancelledInDatabase)} cancelled)`,
        target: '= seeded − cancelled',
        result: verdict(listed === orders - cancelledInDatabase),
      },
      {
        measure: 'client connections the server still holds 1 s after the clients closed',
        project: String(connectionsAfter),
        target: '0',
        result: verdict(connectionsAfter === 0),
      },
      {
        measure: 'server open files: before the load / after the clients left',
        project: `${filesBefore.all} / ${filesAfter.all} (sockets ${filesBefore.sockets} / ${filesAfter.sockets})`,
        result: 'info',
      },
      {
        measure: 'CPU: server / load generator (of one core)',
        project: `${Math.round(cpu.server * 100)}% / ${Math.round(cpu.client * 100)}%`,
        result: 'info',
      },
    )
    const trajectory = Array.from({ length: 11 }, (_, tenth) => {
      const at = (tenth / 10) * elapsedMs
      const nearest = samples.reduce((best, sample) => (Math.abs(sample[0] - at) < Math.abs(best[0] - at) ? sample : best))
      return (nearest[1] / MIB).toFixed(0)
    }).join(', ')
    const mix = KINDS.map((kind) => `${kind.name} ${fmt.count(state.byKind.get(kind.name) ?? 0)}`).join('; ')
    section.notes.push(
      `${CLIENTS} closed-loop clients (one request in flight each, kept-alive connections) for ${seconds} s (SOAK_SECONDS), stopped by ${stoppedBy === 'time' ? 'time' : `the bound of ${fmt.count(maxRequests)} requests`}; ${fmt.count(orders)} orders seeded by import before the load (SOAK_ORDERS), 75% pending. Requests by kind: ${mix}.`,
      `Cancels of pending orders are paced to use ${PENDING_SHARE * 100}% of them evenly over the run (${fmt.count(state.pendingTaken())} drawn); when ahead of that pace, a client cancels an already cancelled order instead (404). Every cancel changes the list's version, so most lists after it are cache misses streamed from the database.`,
      `Server RSS (VmRSS) read every ${SAMPLE_MS / 1000} s (${samples.length} samples); start = median of the samples from ${WARMUP_SHARE * 100}% to ${2 * WARMUP_SHARE * 100}% of the run (after warm-up), end = median of those of its last ${WARMUP_SHARE * 100}%, the last taken as the load stopped. RSS at each tenth of the run (MiB): ${trajectory}.`,
      `Every answer is checked against what its request should get: status; an Error body with exactly {code, message, status}, the expected code and the HTTP status; Allow on 405 and WWW-Authenticate on 401; ETag and the Content-Encoding asked for on 200; a 304 only for the current ETag; a JSON array (1 compressed list in ${DECODE_EVERY} decoded). Open files after the load include the database connections kept for reuse (SQLite: up to 4 idle readers, 2 files each; PostgreSQL: the pool).`,
    )
    if (state.unexpected.length > 0) section.notes.push(`First unexpected answers: ${state.unexpected.join(' | ')}`)
  } finally {
    await database.drop()
  }
}

/** Orders in the current list, counted from its text (ids never go through a JS number). */
async function countOrders(origin: string, auth: Record<string, string>): Promise<number> {
  const agent = new Agent({ keepAlive: false })
  try {
    const outcome = await send(agent, origin, {
      method: 'GET',
      path: '/v1/store/orders',
      headers: auth,
      keepBody: true,
      check: () => undefined,
    })
    if (outcome.status !== 200) throw new Error(`the list after the soak: status ${outcome.status}`)
    return outcome.body!.toString('utf8').match(/"id":/g)?.length ?? 0
  } finally {
    agent.destroy()
  }
}
