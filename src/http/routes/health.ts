import { errorBody } from '../../errors.js'
import { StoreUnavailableError } from '../../store/store.js'
import type { ApiApp } from '../api-app.js'

/** Liveness and readiness, without authentication, outside /v1. */
export function healthRoutes(app: ApiApp): void {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }))

  app.get('/readyz', { schema: { hide: true } }, async (request, reply) => {
    try {
      await app.store.ping()
      app.databaseOutage.succeeded()
      return { status: 'ready' }
    } catch (error) {
      if (error instanceof StoreUnavailableError) app.databaseOutage.failed(error)
      else request.log.warn({ err: error }, 'database not reachable')
      return reply.code(503).header('retry-after', '1').send(errorBody('service_unavailable', 'The database is not reachable.'))
    }
  })
}
