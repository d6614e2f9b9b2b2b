import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type {
  FastifyBaseLogger,
  FastifyInstance,
  onRequestHookHandler,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify'
import type { ApiKey, Scope } from '../domain/api-keys.js'
import type { Config } from '../config.js'
import type { OutageLog } from '../outage-log.js'
import type { Store } from '../store/store.js'
import type { Metrics } from './metrics.js'

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    store: Store
    metrics: Metrics
    /** What the log says of the database's unavailability, once a minute at most (outage-log.ts). */
    databaseOutage: OutageLog
    /**
     * An onRequest hook: 401 without a valid key, 403 without every one of `scopes` (naming those
     * it lacks); sets `request.apiKey`. Before the body is read: a key without the scopes is 403
     * whatever it sent.
     */
    requireScope(...scopes: [Scope, ...Scope[]]): onRequestHookHandler
  }
  interface FastifySchema {
    /** OpenAPI extension on every operation of the document. */
    'x-stability'?: 'stable' | 'beta' | 'experimental'
  }
  interface FastifyRequest {
    apiKey: ApiKey | null
  }
}

/** The Fastify instance routes are registered on: TypeBox types, and the decorations above. */
export type ApiApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>
