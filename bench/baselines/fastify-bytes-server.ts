/**
 * Reference point of comparison 4 (not a target): a bare Fastify app — no plugins, hooks, logging,
 * authentication or database — answering GET /v1/store/orders with the same bytes from memory
 * (BODY_FILE). It shows how much of the gap to raw node:http is the framework itself. Child process
 * of bench/run.ts.
 */
import { readFileSync } from 'node:fs'
import Fastify from 'fastify'
import { failed, onShutdown, tell } from '../lib/child-side.js'

try {
  const file = process.env.BODY_FILE
  if (file === undefined) throw new Error('BODY_FILE is not set')
  const body = readFileSync(file)
  const app = Fastify({ logger: false })
  app.get('/v1/store/orders', async (_request, reply) => reply.type('application/json; charset=utf-8').send(body))
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  onShutdown(() => app.close())
  tell({ type: 'ready', url })
} catch (error) {
  failed(error)
}
