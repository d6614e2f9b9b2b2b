import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import type { Config } from '../config.js'
import { ERROR_CODES } from '../errors.js'
import { errorCodeTable, onlyComponents, withErrorExamples, type OperationsOf } from './openapi.js'

/** The name of the v2 document's decorator (v1's is `swagger`). */
export const SWAGGER_V2 = 'swaggerV2'

// In the v2 document, the v2 Order is `Order`; v1's (a shared schema of the app) is dropped.
const COMPONENT_NAMES: Record<string, string> = { OrderV2: 'Order', Order: 'OrderV1' }

/**
 * @fastify/swagger options of the v2 document, registered in the `/v2` context: generated from the
 * schemas of the v2 routes, which also validate and serialize.
 */
export function openApiV2Document(config: Config): FastifyDynamicSwaggerOptions & { decorator: string } {
  return {
    decorator: SWAGGER_V2,
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Petstore Orders',
        version: '2.0.0-beta.1',
        description:
          'Orders placed in the pet store, version 2 (beta): pages of orders with filters, each order with its status, ' +
          'and a feed of the changes to orders (experimental). ' +
          'Every operation needs a bearer API key (`Authorization: Bearer <API_KEY>`). int64 ids are exact JSON integer ' +
          'literals — parse them losslessly. Version 1 stays fully supported.\n\n' +
          'Pages are keyset-paginated: follow `nextCursor` (or the `Link` header with `rel="next"`) with the same ' +
          'filters until it is absent. A cursor needs no server state and stays valid across instances and restarts.\n\n' +
          'The event feed (`listOrderEvents`) has no last page: every page has a `nextCursor`, and a client that resumes ' +
          'from each one receives every change exactly once, in the order it was committed; `wait` makes a request a ' +
          'long poll.\n\n' +
          'Every error, of every status, has the body `{code, message, status}`; `message` names the parameter at ' +
          'fault. Any request may also get 429 (with `Retry-After`), 500 or 503. Error codes:\n\n' +
          `| code | status | meaning |\n|---|---|---|\n${errorCodeTable(ERROR_CODES)}`,
        license: { name: 'MIT', url: 'https://opensource.org/licenses/MIT' },
      },
      servers: [
        { url: config.publicBaseUrl.replace(/\/v1$/, '/v2'), description: 'Production' },
        { url: config.stagingBaseUrl.replace(/\/v1$/, '/v2'), description: 'Staging' },
      ],
      tags: [{ name: 'orders', description: 'Orders placed in the store' }],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `pso_` followed by 40 base62 characters' },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => {
        const id = String(json.$id ?? `def-${i}`)
        return COMPONENT_NAMES[id] ?? id
      },
    },
    // The servers end in /v2, so the paths are relative to it.
    transform: ({ schema, url }) =>
      url.startsWith('/v2/') ? { schema, url: url.replace(/^\/v2(?=\/)/, '') } : { schema: { ...schema, hide: true }, url },
    transformObject: (document) => {
      if (!('openapiObject' in document)) throw new Error('an OpenAPI 3 document is expected')
      const v2 = onlyComponents(document.openapiObject as OperationsOf, ['Order', 'OrderEvent', 'Error'], ERROR_CODES)
      return withErrorExamples(optionalBodies(v2)) as typeof document.openapiObject
    },
  }
}

/**
 * @fastify/swagger marks every request body required (Fastify's own validator needs one); the app's
 * body validator (strict-body.ts) takes a request without a body as an empty one, and so does every
 * v2 operation with a body (cancelOrder's reason is optional).
 */
function optionalBodies(document: OperationsOf): OperationsOf {
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      const body = (operation as { requestBody?: { required?: boolean } } | undefined)?.requestBody
      if (body !== undefined) body.required = false
    }
  }
  return document
}
