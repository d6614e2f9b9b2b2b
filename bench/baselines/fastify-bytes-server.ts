/**
 * Reference point of comparison 4 (not a target): a bare Fastify app — no plugins, hooks, logging,
 * authentication or database — answering GET /v1/store/orders with the same bytes from memory
 * (BODY_FILE). It shows how much of the gap to raw node:http is the framework itself. With
 * LOG_EACH_REQUEST=1 it also logs one pino line per request, as the project does (to the project's
 * batched stdout destination), and nothing else: what an access log costs any Fastify app. Child process of bench/run.ts.
 */
import { readFileSync } from 'node:fs'
import Fastify, { LogController, type FastifyInstance } from 'fastify'
import pino from 'pino'
import { logDestination } from '../../src/server.js'
import { failed, onShutdown, tell } from '../lib/child-side.js'

try {
  const file = process.env.BODY_FILE
  if (file === undefined) throw new Error('BODY_FILE is not set')
  const body = readFileSync(file)
  const logging = process.env.LOG_EACH_REQUEST === '1'
  const app: FastifyInstance = logging
    ? (Fastify({
        loggerInstance: pino({}, logDestination()),
        logController: new LogController({ disableRequestLogging: true }),
      }) as unknown as FastifyInstance)
    : Fastify({ logger: false })
  if (logging) {
    app.addHook('onResponse', (request, reply, done) => {
      request.log.info({ method: request.method, url: request.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 }, 'request')
      done()
    })
  }
  app.get('/v1/store/orders', async (_request, reply) => reply.type('application/json; charset=utf-8').send(body))
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  onShutdown(() => app.close())
  tell({ type: 'ready', url })
} catch (error) {
  failed(error)
}
