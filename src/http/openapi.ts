import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import type { Config } from '../config.js'
import { ERROR_CODES, ERRORS, errorBody, V1_ERROR_CODES, type ErrorCode } from '../errors.js'

/** The v1 document's options (v2 has a document of its own: openapi-v2.ts). */
export function openApiDocument(config: Config): FastifyDynamicSwaggerOptions {
  return documentOptions(config, {
    prefix: '/v1',
    version: '1.0.0',
    description:
      'Orders placed in the pet store: list every order, cancel one. Every operation needs a bearer API key ' +
      '(`Authorization: Bearer <API_KEY>`). int64 ids are exact JSON integer literals — parse them losslessly.\n\n' +
      'Every error, of every status, has the body `{code, message, status}`. Each operation lists the errors ' +
      'of its own, with an example of each code; any request may also get a code of the table below that ' +
      'is about the request itself (malformed, too large, too slow), and 429 (with `Retry-After`), 500 or ' +
      '503. Error codes:',
    tags: [
      { name: 'orders', description: 'Orders placed in the store' },
      { name: 'pets', description: 'Pets (deprecated operations)' },
    ],
    components: ['Order', 'Pet', 'Error'],
    codes: V1_ERROR_CODES,
  })
}

/**
 * What a version's document has of its own. `prefix`: its servers end in it, and it describes the
 * routes under it, relative to it. `description`: up to the table of `codes`, the Error codes it
 * lists (each version's document shows only its own), with `messages` in place of the shared ones.
 * `components`: the schema components kept (every shared schema of the application reaches every
 * document), `names` those not named after their $id. `finish`: what the version adds once the
 * error examples are in.
 */
interface DocumentParts {
  prefix: '/v1' | '/v2'
  version: string
  description: string
  tags: { name: string; description: string }[]
  components: readonly string[]
  names?: Record<string, string>
  codes: readonly ErrorCode[]
  messages?: Partial<Record<ErrorCode, string>>
  finish?: (document: OperationsOf) => OperationsOf
}

/**
 * @fastify/swagger options: the document is generated from the route schemas that also validate
 * and serialize, so it cannot drift from what the server does.
 */
export function documentOptions(config: Config, parts: DocumentParts): FastifyDynamicSwaggerOptions {
  const { prefix, finish = (document: OperationsOf) => document } = parts
  return {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Petstore Orders',
        version: parts.version,
        description:
          `${parts.description}\n\n| code | status | meaning |\n|---|---|---|\n` +
          parts.codes.map((code) => `| \`${code}\` | ${ERRORS[code].status} | ${parts.messages?.[code] ?? ERRORS[code].message} |`).join('\n'),
        license: { name: 'MIT', url: 'https://opensource.org/licenses/MIT' },
      },
      servers: [
        { url: config.publicBaseUrl.replace(/\/v1$/, prefix), description: 'Production' },
        { url: config.stagingBaseUrl.replace(/\/v1$/, prefix), description: 'Staging' },
      ],
      tags: parts.tags,
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `pso_` followed by 40 base62 characters' },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    // Name components after their $id (Order, Pet, Error) instead of def-0, def-1, …
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => {
        const id = String(json.$id ?? `def-${i}`)
        return parts.names?.[id] ?? id
      },
    },
    transform: ({ schema, url }) =>
      url.startsWith(`${prefix}/`) ? { schema, url: url.slice(prefix.length) } : { schema: { ...schema, hide: true }, url },
    transformObject: (document) => {
      if (!('openapiObject' in document)) throw new Error('an OpenAPI 3 document is expected')
      const openapi = document.openapiObject as OperationsOf
      const schemas = openapi.components?.schemas ?? {}
      for (const name of Object.keys(schemas)) if (!parts.components.includes(name)) delete schemas[name]
      const code = schemas.Error?.properties?.code
      if (code !== undefined) schemas.Error!.properties!.code = { ...code, enum: [...parts.codes] }
      return finish(withErrorExamples(openapi, parts.messages)) as typeof document.openapiObject
    },
  }
}

/** The part of the document read here. */
export interface OperationsOf {
  paths?: Record<string, Record<string, { responses?: Record<string, ResponseOf> } | undefined>>
  components?: { schemas?: Record<string, { properties?: Record<string, object> }> }
}
interface ResponseOf {
  description?: string
  content?: Record<string, { examples?: Record<string, { summary: string; value: unknown }> } | undefined>
}

/**
 * Gives every error response an example of each code it names. A response description names its
 * codes in backticks (`order_not_found`): the reference then shows the exact body of every error an
 * operation answers, not the Error schema's one example. A description that names none of the codes
 * of its status is a mistake, refused here (and so by the OpenAPI tests). `messages`: the message a
 * version sends for a code in place of the shared one.
 */
function withErrorExamples(document: OperationsOf, messages: Partial<Record<ErrorCode, string>> = {}): OperationsOf {
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(item)) {
      for (const [status, response] of Object.entries(operation?.responses ?? {})) {
        const media = response.content?.['application/json']
        if (Number(status) < 400 || media === undefined) continue
        const codes = ERROR_CODES.filter(
          (code) => ERRORS[code].status === Number(status) && (response.description ?? '').includes(`\`${code}\``),
        )
        if (codes.length === 0) {
          throw new Error(`${method.toUpperCase()} ${path}: the ${status} response names none of the codes of its status`)
        }
        media.examples = Object.fromEntries(
          codes.map((code) => [code, { summary: messages[code] ?? ERRORS[code].message, value: errorBody(code, messages[code]) }]),
        )
      }
    }
  }
  return document
}
