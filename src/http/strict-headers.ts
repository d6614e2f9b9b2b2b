import { ApiError, type ErrorCode } from '../errors.js'

/** The part of a TypeBox object schema the checked headers are read from: strings with a pattern. */
export interface HeadersSchema {
  properties?: Record<string, { type?: string; pattern?: string }>
}

// The error each checked header answers with when it is malformed.
const INVALID: Record<string, ErrorCode> = {
  'idempotency-key': 'invalid_idempotency_key',
  'if-match': 'invalid_if_match',
  'if-none-match': 'invalid_if_none_match',
}

/**
 * Validates the request headers a route's schema names with a `pattern`: each, when present, must
 * match it, else it is 400 with the header's own code (Fastify's default validator would answer a
 * generic 400). A header named without a pattern is documented only, and every other header is left
 * alone. A header sent twice reaches here joined by ", " (Node joins repeated headers): If-Match and
 * If-None-Match are lists, whose pattern takes that; Idempotency-Key's, without spaces, does not.
 */
export function strictHeadersValidator(schema: HeadersSchema): (headers: unknown) => { value: unknown } | { error: ApiError } {
  const checks = Object.entries(schema.properties ?? {}).flatMap(([name, property]) => {
    const lower = name.toLowerCase()
    const code = INVALID[lower]
    if (property.type !== 'string') throw new Error(`header "${name}": a string is expected`)
    if (property.pattern === undefined) return []
    if (code === undefined) throw new Error(`header "${name}": a pattern needs a known error code`)
    return [{ name: lower, pattern: new RegExp(property.pattern), code }]
  })
  return (headers) => {
    const given = headers as Record<string, string | string[] | undefined>
    for (const { name, pattern, code } of checks) {
      const value = given[name]
      if (value !== undefined && (typeof value !== 'string' || !pattern.test(value))) return { error: new ApiError(code) }
    }
    return { value: headers }
  }
}
