import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { it } from 'node:test'
import { bearer, forEachStore, startTestServer } from './support/harness.js'

const SLOW = 200 // slowloris connections: headers trickle in, never finish
const SILENT = 200 // half-open connections: connected, never send a byte
/**
 * A slow connection sends a header line this often: 12 bytes a second, which would take far longer
 * than the runner lets a test file run (10 minutes) to fill HTTP_MAX_HEADER_SIZE (16 KiB).
 */
const DRIP_MS = 1000

interface Connection {
  socket: Socket
  /** performance.now() before connecting: the server's timeouts for it start later. */
  openedAt: number
  /** Resolves with performance.now() once the socket has closed. */
  closed: Promise<number>
  /** What the server has sent on it so far. */
  received(): string
}

/** A connection to the server, watched from before it connects, so that no answer or close is missed. */
function open(origin: string): Promise<Connection> {
  const { hostname, port } = new URL(origin)
  const openedAt = performance.now()
  const socket = connect(Number(port), hostname)
  let received = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => (received += chunk)) // read, so that the server's close is seen
  socket.on('error', () => {}) // the server closing them is the point
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())))
  const connection: Connection = { socket, openedAt, closed, received: () => received }
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve(connection))
    socket.once('error', reject)
  })
}

/** Opens the slow and the silent connections, the slow ones dripping header lines until `stop()`. */
async function openSlowClients(origin: string): Promise<{ slow: Connection[]; silent: Connection[]; stop(): void }> {
  const slow = await Promise.all(Array.from({ length: SLOW }, () => open(origin)))
  const silent = await Promise.all(Array.from({ length: SILENT }, () => open(origin)))
  for (const { socket } of slow) socket.write('GET /v1/store/orders HTTP/1.1\r\nHost: x\r\n')
  const drip = setInterval(() => {
    for (const { socket } of slow) if (!socket.destroyed) socket.write('X-Drip: 1\r\n')
  }, DRIP_MS)
  return {
    slow,
    silent,
    stop() {
      clearInterval(drip)
      for (const { socket } of [...slow, ...silent]) socket.destroy()
    },
  }
}

forEachStore('slow and half-open connections', (kind) => {
  it(`${SLOW} slowloris and ${SILENT} silent connections do not delay other clients`, async () => {
    // Timeouts of minutes (the header timeout at Node's bound for it, the default request timeout's
    // 5 minutes), for 30 requests: every slow connection is still open when they have been answered,
    // however long they take on a loaded machine.
    const server = await startTestServer(kind, {
      env: { HTTP_HEADERS_TIMEOUT_MS: '300000', HTTP_REQUEST_TIMEOUT_MS: '600000', HTTP_IDLE_TIMEOUT_MS: '3600000', RATE_LIMIT_PER_KEY: '0' },
    })
    const key = await server.createKey()
    await server.importOrders(Array.from({ length: 100 }, (_, i) => ({ id: BigInt(i + 1) })))
    const clients = await openSlowClients(server.origin)
    const closed = new Set<Socket>()
    for (const { socket, closed: closing } of [...clients.slow, ...clients.silent]) void closing.then(() => closed.add(socket))
    try {
      // Ordinary clients are served meanwhile: every one of them while all the slow ones are still
      // connected, so none waited for them to go.
      for (let i = 0; i < 30; i++) {
        const response = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
        assert.equal(response.status, 200)
        await response.arrayBuffer()
        assert.equal(closed.size, 0, `ordinary request ${i + 1} was answered only once slow connections were closed`)
      }
    } finally {
      clients.stop()
    }
  })

  it(`${SLOW} slowloris and ${SILENT} silent connections are cut off by the header timeout, answered 408`, async () => {
    const HEADERS_TIMEOUT_MS = 1000
    // A 408 is the header timeout's answer (the request timeout, which answers so too, is far longer
    // than the test can run). The idle timeout, ten times the header timeout, closes a silent
    // connection without one: a silent connection answered 408 was cut off by the header timeout
    // before that, the timeouts checked far more often than Node's default 30 s. An order of the
    // server's own timers, which a loaded machine delays alike.
    const IDLE_TIMEOUT_MS = 10 * HEADERS_TIMEOUT_MS
    const server = await startTestServer(kind, {
      env: { HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS), HTTP_REQUEST_TIMEOUT_MS: '600000', HTTP_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS) },
    })
    const clients = await openSlowClients(server.origin)
    try {
      // Each is closed, however late on a loaded machine (one kept open would hang here until the
      // runner's timeout), with the 408, and none before the header timeout.
      for (const [what, connections] of [['slowloris', clients.slow], ['silent', clients.silent]] as const) {
        for (const [i, connection] of connections.entries()) {
          const closedAt = await connection.closed
          const answer = connection.received()
          assert.match(answer, /^HTTP\/1\.1 408 /, `${what} connection ${i + 1} was closed without the 408: ${JSON.stringify(answer)}`)
          assert.match(answer, /"code":"request_timeout"/)
          const open = closedAt - connection.openedAt
          assert.ok(open >= HEADERS_TIMEOUT_MS, `${what} connection ${i + 1} was cut off after ${Math.round(open)} ms, before the header timeout`)
        }
      }
    } finally {
      clients.stop()
    }
  })
})

forEachStore('connection limit', (kind) => {
  it('closes a connection past HTTP_MAX_CONNECTIONS unanswered, and takes new ones again when one closes', async () => {
    const server = await startTestServer(kind, { env: { HTTP_MAX_CONNECTIONS: '5' } })
    // The server's end of every connection it takes, to see when it has seen one close.
    const taken: Socket[] = []
    server.app.server.on('connection', (socket: Socket) => taken.push(socket))
    const held = await Promise.all(Array.from({ length: 5 }, () => open(server.origin)))
    // The sixth is closed unanswered: had it been taken, the request written on it would have been
    // answered, and the connection closed after the answer (Connection: close).
    const extra = await open(server.origin)
    extra.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    await extra.closed
    assert.equal(extra.received(), '', 'the sixth connection was taken and answered')
    const first = held[0]!.socket
    const peer = taken.find((socket) => socket.remotePort === first.localPort)
    assert.ok(peer !== undefined, 'the server took the first connection')
    first.destroy()
    // Once the server has closed its end of that connection (however long that takes), a new one is taken.
    if (!peer.closed) await new Promise((resolve) => peer.once('close', resolve))
    assert.equal((await fetch(`${server.origin}/healthz`)).status, 200)
    for (const { socket } of held) socket.destroy()
  })
})
