/**
 * Child process: webhook receivers on one 127.0.0.1 port, one per path, each kind of path behaving
 * as one kind of receiver:
 *
 *   /e/<n>  healthy: answers 200 at once; its body is parsed for its `timestamp` (the event's
 *           occurredAt), so each delivery's latency from the event's commit is known
 *   /t/<n>  trickling: answers 200 at once, then sends its body one byte every half second, without end
 *   /h/<n>  hanging: never answers; the request is kept open until the sender gives up
 *   /f/<n>  failing: 503 with `Retry-After: 3600`
 *
 * For each path it keeps what a receiver relying on the feed's order would check: how many
 * deliveries came, whether every `webhook-id` was above the one before (ascending, none twice), the
 * last id, and when the first and the last came. IPC: `{type: 'reset'}` forgets everything and
 * destroys the connections held open (trickling and hanging); `{type: 'stats'}` is answered with
 * `{type: 'stats', receivers}`; `{type: 'latencies', path, after}` with `{type: 'latencies', ms}`,
 * the latency of each event above `after` delivered to that healthy path (its first delivery).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { failed, onShutdown, tell } from './child-side.js'

export interface ReceiverStats {
  path: string
  deliveries: number
  /** Deliveries whose webhook-id was not above the previous one's (a repeat or a reordering). */
  outOfOrder: number
  firstId: string | null
  lastId: string | null
  /** performance.now() of this process at the first and the last delivery. */
  firstMs: number
  lastMs: number
}

interface State {
  deliveries: number
  outOfOrder: number
  firstId: bigint | null
  lastId: bigint | null
  firstMs: number
  lastMs: number
  /** Healthy paths: arrival Date.now() − the body's timestamp, by webhook-id, the first delivery of each. */
  latencies: Map<bigint, number>
}

const TRICKLE_EVERY_MS = 500
const RETRY_AFTER_SECONDS = '3600'

let receivers = new Map<string, State>()
/** Responses of trickling and hanging paths still open: `reset` and shutdown destroy them. */
const held = new Set<ServerResponse>()

function record(path: string, id: bigint): State {
  const now = performance.now()
  let state = receivers.get(path)
  if (state === undefined) {
    state = { deliveries: 0, outOfOrder: 0, firstId: id, lastId: null, firstMs: now, lastMs: now, latencies: new Map() }
    receivers.set(path, state)
  }
  if (state.lastId !== null && id <= state.lastId) state.outOfOrder++
  state.deliveries++
  state.lastId = id
  state.lastMs = now
  return state
}

function hold(response: ServerResponse): void {
  held.add(response)
  response.on('close', () => held.delete(response))
}

function trickle(response: ServerResponse): void {
  response.writeHead(200, { 'content-type': 'text/plain' }) // no length: chunked, without end
  response.write('.')
  const timer = setInterval(() => response.write('.'), TRICKLE_EVERY_MS)
  response.on('close', () => clearInterval(timer))
  hold(response)
}

function answer(request: IncomingMessage, response: ServerResponse, body: string): void {
  const id = request.headers['webhook-id']
  const path = request.url ?? ''
  if (request.method !== 'POST' || typeof id !== 'string' || !/^[0-9]+$/.test(id)) {
    response.writeHead(400).end()
    return
  }
  const arrived = Date.now()
  const state = record(path, BigInt(id))
  switch (path.slice(0, 3)) {
    case '/e/': {
      const { timestamp } = JSON.parse(body) as { timestamp: string }
      if (!state.latencies.has(BigInt(id))) state.latencies.set(BigInt(id), arrived - Date.parse(timestamp))
      response.writeHead(200, { 'content-length': '0' }).end()
      return
    }
    case '/t/':
      return trickle(response)
    case '/h/':
      return hold(response)
    case '/f/':
      response.writeHead(503, { 'retry-after': RETRY_AFTER_SECONDS, 'content-length': '0' }).end()
      return
    default:
      response.writeHead(404, { 'content-length': '0' }).end()
  }
}

function stats(): ReceiverStats[] {
  return [...receivers].map(([path, s]) => ({
    path,
    deliveries: s.deliveries,
    outOfOrder: s.outOfOrder,
    firstId: s.firstId?.toString() ?? null,
    lastId: s.lastId?.toString() ?? null,
    firstMs: s.firstMs,
    lastMs: s.lastMs,
  }))
}

function latencies(path: string, after: bigint): number[] {
  return [...(receivers.get(path)?.latencies ?? [])].filter(([id]) => id > after).map(([, ms]) => ms)
}

function dropHeld(): void {
  for (const response of held) response.socket?.destroy()
  held.clear()
}

try {
  const server = createServer((request, response) => {
    // Only a healthy path's body is kept (for its timestamp); the others are read and dropped.
    const healthy = request.url?.startsWith('/e/') === true
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => healthy && chunks.push(chunk))
    request.on('end', () => answer(request, response, healthy ? Buffer.concat(chunks).toString() : ''))
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('no port')
    tell({ type: 'ready', url: `http://127.0.0.1:${address.port}` })
  })
  process.on('message', (message: { type: string; path?: string; after?: string }) => {
    if (message.type === 'reset') {
      receivers = new Map()
      dropHeld()
      tell({ type: 'reset' })
    } else if (message.type === 'stats') {
      tell({ type: 'stats', receivers: stats() })
    } else if (message.type === 'latencies') {
      tell({ type: 'latencies', ms: latencies(message.path ?? '', BigInt(message.after ?? '0')) })
    }
  })
  onShutdown(() => {
    dropHeld()
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
} catch (error) {
  failed(error)
}
