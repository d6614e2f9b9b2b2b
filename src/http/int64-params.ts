import type { FastifySchemaCompiler } from 'fastify'
import { parseInt64 } from '../domain/int64.js'
import { ApiError, type ErrorCode } from '../errors.js'
import { strictQueryValidator, type QuerySchema } from './strict-query.js'

interface ParamsSchema {
  properties?: Record<string, { type?: string; format?: string }>
}

// The error each int64 path parameter answers with when it is not an int64.
const INVALID: Record<string, ErrorCode> = { orderId: 'invalid_order_id', petId: 'invalid_pet_id' }

/**
 * Validates path parameters. The schema says `integer`/`int64` (that is what the OpenAPI document
 * shows); a generic validator would coerce "9223372036854775807" through a double and lose digits,
 * so int64 parameters are parsed here, exactly, into bigint.
 */
export const int64ParamsValidator: FastifySchemaCompiler<ParamsSchema> = ({ schema, httpPart }) => {
  if (httpPart === 'querystring') return strictQueryValidator(schema as QuerySchema) // v2's list
  if (httpPart !== 'params') {
    throw new Error(`no validator for ${httpPart ?? 'unknown part'}: routes of this API take path parameters only`)
  }
  const names = Object.entries(schema.properties ?? {})
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
