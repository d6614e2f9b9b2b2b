import { createRequire } from 'node:module'
import type { FastifySchema, FastifySchemaCompiler, FastifyServerOptions } from 'fastify'
import { parseInt64 } from '../domain/int64.js'
import { ApiError, type ErrorCode } from '../errors.js'
import { strictBodyValidator, type BodySchema } from './strict-body.js'
import { strictHeadersValidator, type HeadersSchema } from './strict-headers.js'
import { strictQueryValidator, type QuerySchema } from './strict-query.js'

// The option's type is Ajv's (validators with Ajv's extra fields); Fastify only calls them.
type AjvValidatorBuilder = NonNullable<NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']>
type ValidatorBuilder = (externalSchemas: unknown, ajvOptions: unknown) => FastifySchemaCompiler<FastifySchema>

interface ParamsSchema {
  properties?: Record<string, { type?: string; format?: string }>
}

// The error each int64 path parameter answers with when it is not an int64.
const INVALID: Record<string, ErrorCode> = { orderId: 'invalid_order_id', petId: 'invalid_pet_id', endpointId: 'invalid_endpoint_id' }

// Fastify's own default validator builder (Ajv), loaded from where fastify loads it, so that it is
// exactly the one Fastify would use without this module.
const requireFromFastify = createRequire(createRequire(import.meta.url).resolve('fastify'))
const defaultBuilder = (requireFromFastify('@fastify/ajv-compiler') as () => ValidatorBuilder)()

/**
 * The validator builder of the app (`schemaController.compilersFactory.buildValidator`): path
 * parameters are validated here, query strings strictly by `strict-query.ts` (unknown or repeated
 * parameters refused, int64 exact); bodies strictly by `strict-body.ts` (unknown fields refused, not
 * dropped); the headers a route names by `strict-headers.ts` (each with its own error code); anything
 * else by Fastify's default validator, with the schemas added to the app.
 */
export const int64ParamsValidator = ((externalSchemas, ajvOptions) => {
  const fallback = defaultBuilder(externalSchemas, ajvOptions)
  return (routeSchema) => {
    if (routeSchema.httpPart === 'params') return int64Params(routeSchema)
    if (routeSchema.httpPart === 'querystring') return strictQueryValidator(routeSchema.schema as QuerySchema) // v2
    if (routeSchema.httpPart === 'body') return strictBodyValidator(routeSchema.schema as BodySchema) // v2's writes
    if (routeSchema.httpPart === 'headers') return strictHeadersValidator(routeSchema.schema as HeadersSchema) // placeOrder's key
    return fallback(routeSchema)
  }
}) satisfies ValidatorBuilder as unknown as AjvValidatorBuilder

/**
 * Validates path parameters. The schema says `integer`/`int64` (that is what the OpenAPI document
 * shows); a generic validator would coerce "9223372036854775807" through a double and lose digits,
 * so int64 parameters are parsed here, exactly, into bigint.
 */
const int64Params: FastifySchemaCompiler<FastifySchema> = ({ schema }) => {
  const names = Object.entries((schema as ParamsSchema).properties ?? {})
  for (const [name, property] of names) {
    if (property.type !== 'integer' || property.format !== 'int64' || INVALID[name] === undefined) {
      throw new Error(`path parameter "${name}" must be an int64 with a known error code`)
    }
  }
  return (params: unknown) => {
    const raw = params as Record<string, string>
    const value: Record<string, bigint> = {}
    for (const [name] of names) {
      const parsed = parseInt64(raw[name] ?? '')
      if (parsed === undefined) return { error: new ApiError(INVALID[name]!) }
      value[name] = parsed
    }
    return { value }
  }
}
