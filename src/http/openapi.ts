import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import type { Config } from '../config.js'
import { ERRORS } from '../errors.js'

const errorCodeTable = Object.entries(ERRORS)
  .map(([code, { status, message }]) => `| \`${code}\` | ${status} | ${message} |`)
  .join('\n')

/**
 * @fastify/swagger options: the document is generated from the route schemas that also validate
 * and serialize, so it cannot drift from what the server does.
 */
export function openApiDocument(config: Config): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Petstore Orders',
        version: '1.0.0',
        description:
          'Orders placed in the pet store: list every order, cancel one. Every operation needs a bearer API key ' +
          '(`Authorization: Bearer <API_KEY>`). int64 ids are exact JSON integer literals — parse them losslessly.\n\n' +
          'Every error, of every status, has the body `{code, message, status}`. Error codes:\n\n' +
          `| code | status | meaning |\n|---|---|---|\n${errorCodeTable}`,
        license: { name: 'MIT', url: 'https://opensource.org/licenses/MIT' },
      },
      servers: [
        { url: config.publicBaseUrl, description: 'Production' },
        { url: config.stagingBaseUrl, description: 'Staging' },
      ],
      tags: [
        { name: 'orders', description: 'Orders placed in the store' },
        { name: 'pets', description: 'Pets (deprecated operations)' },
      ],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `pso_` followed by 40 base62 characters' },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    // Name components after their $id (Order, Pet, Error) instead of def-0, def-1, …
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
    // The servers end in /v1, so the paths are relative to it.
    transform: ({ schema, url }) => ({ schema, url: url.replace(/^\/v1(?=\/)/, '') }),
  }
}
