import autocannon from 'autocannon'
import { v4 as uuidv4, v7 as uuidv7 } from 'uuid'

/** What the benches read from an autocannon run. */
export interface LoadResult {
  requests: number
  seconds: number
  perSecond: number
  ok: number
  non2xx: number
  errors: number
  timeouts: number
  p50Ms: number
  p99Ms: number
  maxMs: number
}

function summarize(result: autocannon.Result): LoadResult {
  const requests = result['1xx'] + result['2xx'] + result['3xx'] + result['4xx'] + result['5xx']
  return {
    requests,
    seconds: result.duration,
    perSecond: requests / result.duration,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
  }
}

/** autocannon's callback form: the instance (to stop it) and its result. */
function start(options: autocannon.Options): { instance: autocannon.Instance; result: Promise<LoadResult> } {
  let instance: autocannon.Instance | undefined
  const result = new Promise<LoadResult>((resolve, reject) => {
    instance = autocannon(options, (error: unknown, outcome: autocannon.Result) => {
      if (error !== null && error !== undefined) reject(error instanceof Error ? error : new Error(String(error)))
      else resolve(summarize(outcome))
    })
  })
  return { instance: instance!, result }
}

/** Throws when any request failed or was not answered 2xx: a bench never counts errors as work. */
export function requireAllOk<T extends LoadResult>(what: string, result: T): T {
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${what}: ${result.non2xx} non-2xx answers and ${result.errors} errors (${result.timeouts} timeouts) of ${result.requests}`)
  }
  return result
}

/**
 * As many requests as `connections` concurrent clients (one request in flight each) get answered in
 * `seconds`, after `warmupSeconds` of the same load that are not counted.
 */
export async function closedLoop(options: {
  url: string
  headers?: Record<string, string>
  connections: number
  seconds: number
  warmupSeconds: number
}): Promise<LoadResult & { warmupRequests: number }> {
  const base = { url: options.url, headers: options.headers, connections: options.connections }
  const warmup = options.warmupSeconds > 0 ? await start({ ...base, duration: options.warmupSeconds }).result : undefined
  return { ...(await start({ ...base, duration: options.seconds }).result), warmupRequests: warmup?.requests ?? 0 }
}

/**
 * `connections` concurrent clients, each sending DELETE /v1/store/orders/{id} with the next id of
 * `ids` (each id once), until `ids.length - connections` are answered or `maxSeconds` passed.
 * autocannon builds each client's next request before the current one is answered, so up to
 * `connections` ids are drawn but never sent: they are the reserve that keeps every sent id distinct.
 */
export function cancelLoad(options: {
  origin: string
  headers: Record<string, string>
  ids: number[]
  connections: number
  maxSeconds: number
}): Promise<LoadResult & { lastIdDrawn: number }> {
  return orderLoad({ ...options, method: 'DELETE', path: (id) => `/v1/store/orders/${id}` })
}

/**
 * As cancelLoad, but each client sends PATCH /v2/store/orders/{id} with `patch` (the same merge
 * patch for every order, as `application/merge-patch+json`) to the next id of `ids`.
 */
export function patchLoad(options: {
  origin: string
  headers: Record<string, string>
  ids: number[]
  patch: unknown
  connections: number
  maxSeconds: number
}): Promise<LoadResult & { lastIdDrawn: number }> {
  return orderLoad({
    ...options,
    method: 'PATCH',
    path: (id) => `/v2/store/orders/${id}`,
    body: JSON.stringify(options.patch),
    headers: { ...options.headers, 'content-type': 'application/merge-patch+json' },
  })
}

/** One request per id of `ids`, each id once (see cancelLoad), from `connections` clients. */
async function orderLoad(options: {
  origin: string
  headers: Record<string, string>
  ids: number[]
  connections: number
  maxSeconds: number
  method: 'DELETE' | 'PATCH'
  path: (id: number) => string
  body?: string
}): Promise<LoadResult & { lastIdDrawn: number }> {
  const amount = options.ids.length - options.connections
  if (amount < options.connections) throw new Error(`too few pending orders left for ${options.connections} clients`)
  let next = 0
  const started = performance.now()
  const { instance, result } = start({
    url: options.origin,
    headers: options.headers,
    connections: options.connections,
    amount,
    timeout: 30,
    requests: [
      {
        method: options.method,
        body: options.body,
        setupRequest: (request: autocannon.Request) => {
          const id = options.ids[next++]
          if (id === undefined) throw new Error(`${options.method} load: ran out of order ids`)
          return { ...request, path: options.path(id) }
        },
      },
    ],
  })
  const run = await untilLastAnswer(instance, result, started, options.maxSeconds)
  return { ...run, lastIdDrawn: options.ids[Math.min(next, options.ids.length) - 1]! }
}

/** The Idempotency-Keys a load sends (placeLoad). */
export type KeyKind = 4 | 7 | 'counter'

/** What autocannon keeps per connection (setupRequest's context): here, a counter key's client and count. */
interface ClientState {
  client?: number
  sent?: number
}

/** A new key for each request: a UUID of that version (v7 also for the nonce), or a client's counter. */
function keyMaker(kind: KeyKind | undefined): (client: ClientState) => string {
  if (kind !== 'counter') return kind === 4 ? () => uuidv4() : () => uuidv7()
  // The run's own prefix: the keys stay new in a database earlier runs placed with.
  const run = uuidv4().slice(0, 8)
  let clients = 0
  return (state) => {
    state.client ??= ++clients
    state.sent = (state.sent ?? 0) + 1
    return `bench-${run}-${state.client}-${state.sent}`
  }
}

/**
 * `connections` concurrent clients, each sending POST /v2/store/orders (an order of `petId`, which
 * marks the run's orders in the database) until `amount` are answered or `maxSeconds` passed. With
 * `idempotencyKeys`, every request carries an Idempotency-Key of its own, a new UUID of that version:
 * each places an order, and each key is recorded with it. 7 is what the project's client makes
 * (time-ordered); 4 is the random UUID of most other clients; 'counter' is a client's own counter,
 * `bench-<run>-<client>-<n>`, as clients that number their requests send. Without `idempotencyKeys`, every
 * request still carries a new UUIDv7, in an X-Bench-Nonce header no server acts on: the setupRequest
 * makes autocannon build every request anew (without one it sends a single request built once), so
 * runs with and without keys cost the load generator the same and differ only in what the server
 * does. `prebuilt`: no key and no nonce, the one request built once, the generator's cheapest load.
 * `metadata`: called for every request, its order's metadata (placeOrder's `metadata`; not with
 * `prebuilt`); the request's body is then built anew too.
 */
export async function placeLoad(options: {
  origin: string
  headers: Record<string, string>
  petId: number
  amount: number
  connections: number
  maxSeconds: number
  idempotencyKeys?: KeyKind
  prebuilt?: boolean
  metadata?: () => Record<string, string>
}): Promise<LoadResult> {
  if (options.amount < options.connections) throw new Error(`too few places for ${options.connections} clients`)
  if (options.prebuilt === true && options.idempotencyKeys !== undefined) throw new Error('a prebuilt request carries no key')
  if (options.prebuilt === true && options.metadata !== undefined) throw new Error('a prebuilt request carries no metadata')
  const body = JSON.stringify({ petId: options.petId, quantity: 1 })
  const { metadata } = options
  const headers = { ...options.headers, 'content-type': 'application/json' }
  const newKey = keyMaker(options.idempotencyKeys)
  const uuidHeader = options.idempotencyKeys === undefined ? 'x-bench-nonce' : 'idempotency-key'
  const request: autocannon.Request = { method: 'POST', path: '/v2/store/orders', body, headers }
  const started = performance.now()
  const { instance, result } = start({
    url: options.origin,
    connections: options.connections,
    amount: options.amount,
    timeout: 30,
    requests: [
      options.prebuilt === true
        ? request
        : {
            ...request,
            setupRequest: (built: autocannon.Request, client: ClientState) => ({
              ...built,
              headers: { ...built.headers, [uuidHeader]: newKey(client) },
              ...(metadata === undefined ? {} : { body: JSON.stringify({ petId: options.petId, quantity: 1, metadata: metadata() }) }),
            }),
          },
    ],
  })
  return untilLastAnswer(instance, result, started, options.maxSeconds)
}

/**
 * The result of a run of a fixed amount, stopped after `maxSeconds`, timed from `started` to its
 * last answer: autocannon notices the end, and reports its duration, only at its next one-second
 * tick (5.01 s, 7.01 s, …), up to 20% off at these lengths.
 */
async function untilLastAnswer(instance: autocannon.Instance, result: Promise<LoadResult>, started: number, maxSeconds: number): Promise<LoadResult> {
  let lastAnswer = started
  instance.on('response', () => {
    lastAnswer = performance.now()
  })
  const timer = setTimeout(() => instance.stop(), maxSeconds * 1000)
  try {
    const run = await result
    const seconds = (lastAnswer - started) / 1000
    return { ...run, seconds, perSecond: run.requests / seconds }
  } finally {
    clearTimeout(timer)
  }
}
