/**
 * Baseline of comparisons 2 and 4: a bare node:http server that answers every GET with the same bytes
 * the project's server sent for that request, from memory (read once from BODY_FILE at start), with
 * Content-Type and Content-Length. It does no routing, no authentication, no database access: the
 * floor of what any Node.js server can do for that response. Child process of bench/run.ts.
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { failed, onShutdown, tell } from '../lib/child-side.js'

try {
  const file = process.env.BODY_FILE
  if (file === undefined) throw new Error('BODY_FILE is not set')
  const body = readFileSync(file)
  const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': String(body.length) }
  const server = createServer((_req, res) => {
    res.writeHead(200, headers)
    res.end(body)
  })
  server.keepAliveTimeout = 5_000 // the project's default (HTTP_KEEP_ALIVE_TIMEOUT_MS)
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('no TCP address')
    tell({ type: 'ready', url: `http://127.0.0.1:${address.port}` })
  })
  onShutdown(() => new Promise<void>((done) => server.close(() => done())))
} catch (error) {
  failed(error)
}
