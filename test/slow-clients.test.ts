import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { it } from 'node:test'
import { bearer, forEachStore, startTestServer, within } from './support/harness.js'

const SLOW = 200 // slowloris connections: headers trickle in, never finish
const SILENT = 200 // half-open connections: connected, never send a byte
/** The header timeout the slow ones are cut off by: long enough for the ordinary requests to be over by then on a loaded machine. */
const HEADERS_TIMEOUT_MS = 5000

function open(origin: string): Promise<Socket> {
  const { hostname, port } = new URL(origin)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket))
    socket.on('error', () => {}) // the server closing them is the point
    socket.resume() // read (and drop) what the server answers, so its close is seen
    socket.once('error', reject)
  })
}

forEachStore('slow and half-open connections', (kind) => {
  it(`${SLOW} slowloris and ${SILENT} silent connections do not delay other clients, and are cut off by the timeouts`, async () => {
    const server = await startTestServer(kind, {
      env: { HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS), HTTP_REQUEST_TIMEOUT_MS: String(2 * HEADERS_TIMEOUT_MS), RATE_LIMIT_PER_KEY: '0' },
    })
    const key = await server.createKey()
    await server.importOrders(Array.from({ length: 100 }, (_, i) => ({ id: BigInt(i + 1) })))

    const slow = await Promise.all(Array.from({ length: SLOW }, () => open(server.origin)))
    const silent = await Promise.all(Array.from({ length: SILENT }, () => open(server.origin)))
    const closed = new Set<Socket>()
    for (const socket of [...slow, ...silent]) socket.on('close', () => closed.add(socket))
    for (const socket of slow) socket.write('GET /v1/store/orders HTTP/1.1\r\nHost: x\r\n')
    const drip = setInterval(() => {
      for (const socket of slow) if (!socket.destroyed) socket.write('X-Drip: 1\r\n')
    }, 200)

    try {
      // Meanwhile, ordinary clients are served: every one of them while all the slow ones are still
      // connected, so none waited for them to be cut off.
      for (let i = 0; i < 30; i++) {
        const response = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
        assert.equal(response.status, 200)
        await response.arrayBuffer()
        assert.equal(closed.size, 0, `ordinary request ${i + 1} was answered only once slow connections were cut off`)
      }

      // And the slow ones are cut off by the header timeout (checked every second), not kept forever.
      const deadline = Date.now() + 3 * (HEADERS_TIMEOUT_MS + 1000)
      while (closed.size < SLOW + SILENT && Date.now() < deadline) await sleep(100)
      assert.equal(closed.size, SLOW + SILENT, `${SLOW + SILENT - closed.size} slow connections still open`)
    } finally {
      clearInterval(drip)
      for (const socket of [...slow, ...silent]) socket.destroy()
    }
  })
})

forEachStore('connection limit', (kind) => {
  it('closes a connection past HTTP_MAX_CONNECTIONS at once, and takes new ones again when one closes', async () => {
    const server = await startTestServer(kind, { env: { HTTP_MAX_CONNECTIONS: '5' } })
    const held = await Promise.all(Array.from({ length: 5 }, () => open(server.origin)))
    const extra = await open(server.origin)
    const refused = await new Promise<boolean>((resolve) => {
      extra.once('close', () => resolve(true))
      setTimeout(() => resolve(false), 10_000).unref() // closed at once; this only ends the test if it is not
    })
    assert.ok(refused, 'the sixth connection was kept open')
    held[0]!.destroy()
    // Once the server has seen that close (a moment, however loaded the machine), a new connection is taken.
    await within(10_000, 'a new connection taken', () => fetch(`${server.origin}/healthz`).then((health) => health.status === 200, () => false), 50)
    for (const socket of held) socket.destroy()
  })
})
