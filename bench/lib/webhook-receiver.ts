/**
 * Child process: webhook receivers on one 127.0.0.1 port, one per path (`/e/<n>`), each answering
 * 200 at once. For each path it keeps what a receiver relying on the feed's order would check: how
 * many deliveries came, whether every `webhook-id` was above the one before (ascending, none twice),
 * the last id, and when the first and the last came. IPC: `{type: 'reset'}` forgets everything;
 * `{type: 'stats'}` is answered with `{type: 'stats', receivers}`.
 */
import { createServer } from 'node:http'
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
}

let receivers = new Map<string, State>()

try {
  const server = createServer((request, response) => {
    // The body is read (a receiver verifies it) but not kept.
    request.on('data', () => {})
    request.on('end', () => {
      const now = performance.now()
      const header = request.headers['webhook-id']
      if (request.method !== 'POST' || typeof header !== 'string' || !/^[0-9]+$/.test(header)) {
        response.writeHead(400).end()
        return
      }
      const id = BigInt(header)
      let state = receivers.get(request.url ?? '')
      if (state === undefined) {
        state = { deliveries: 0, outOfOrder: 0, firstId: id, lastId: null, firstMs: now, lastMs: now }
        receivers.set(request.url ?? '', state)
      }
      if (state.lastId !== null && id <= state.lastId) state.outOfOrder++
      state.deliveries++
      state.lastId = id
      state.lastMs = now
      response.writeHead(200, { 'content-length': '0' }).end()
    })
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('no port')
    tell({ type: 'ready', url: `http://127.0.0.1:${address.port}` })
  })
  process.on('message', (message: { type: string }) => {
    if (message.type === 'reset') {
      receivers = new Map()
      tell({ type: 'reset' })
    } else if (message.type === 'stats') {
      const stats: ReceiverStats[] = [...receivers].map(([path, s]) => ({
        path,
        deliveries: s.deliveries,
        outOfOrder: s.outOfOrder,
        firstId: s.firstId?.toString() ?? null,
        lastId: s.lastId?.toString() ?? null,
        firstMs: s.firstMs,
        lastMs: s.lastMs,
      }))
      tell({ type: 'stats', receivers: stats })
    }
  })
  onShutdown(() => new Promise<void>((resolve) => server.close(() => resolve())))
} catch (error) {
  failed(error)
}
