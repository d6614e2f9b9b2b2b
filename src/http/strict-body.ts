import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { ApiError } from '../errors.js'
import { shorten } from './shorten.js'

/** The part of a TypeBox object schema a body is validated from: string properties, each a closed set. */
export interface BodySchema {
  properties?: Record<string, PropertySchema>
  required?: readonly string[]
}
/** A string `enum`, or a union of string literals (`anyOf` of `const`). */
interface PropertySchema {
  type?: string
  enum?: readonly unknown[]
  anyOf?: readonly { const?: unknown }[]
}

/**
 * Validates an optional JSON object body from its schema, strictly: a field the schema does not
 * name, or a value outside its `enum`, is 400 `invalid_body` naming it. Nothing is coerced or
 * removed (Fastify's default validator would drop unknown fields without a word). No body at all
 * is valid: Fastify hands validators an absent body as `null` (a JSON `null` is refused before, by
 * {@link jsonObjectBody}).
 */
export function strictBodyValidator(schema: BodySchema): (body: unknown) => { value: unknown } | { error: ApiError } {
  const allowed = new Map(Object.entries(schema.properties ?? {}).map(([name, property]) => [name, closedSet(name, property)]))
  const required = schema.required ?? []
  const names = [...allowed.keys()].map((name) => `"${name}"`).join(', ')
  return (body) => {
    if (body === null || body === undefined) {
      return required.length === 0 ? { value: undefined } : refuse(`The body is required, with ${names}.`)
    }
    if (typeof body !== 'object' || Array.isArray(body)) return refuse(notAnObject(body))
    for (const [name, value] of Object.entries(body)) {
      const values = allowed.get(name)
      if (values === undefined) return refuse(`Unknown field "${shorten(name)}" in the body; it may have ${names}.`)
      if (typeof value !== 'string' || !values.includes(value)) {
        return refuse(`"${name}" must be one of ${values.join(', ')}; got ${shorten(JSON.stringify(value))}.`)
      }
    }
    for (const name of required) if (!Object.hasOwn(body, name)) return refuse(`"${name}" is required in the body.`)
    return { value: body }
  }
}

function closedSet(name: string, property: PropertySchema): readonly string[] {
  const values = property.enum ?? property.anyOf?.map((member) => member.const)
  if (values === undefined || values.length === 0 || !values.every((value): value is string => typeof value === 'string')) {
    throw new Error(`body field "${name}": no strict validator for this schema (a closed set of strings is expected)`)
  }
  return values
}

/** The 415 message for a body of any media type but JSON (text/plain here, the others in error-handling.ts). */
export const BODY_MUST_BE_JSON = 'The request body must be JSON, sent with Content-Type: application/json.'

/**
 * A preValidation hook for a route whose body is an optional JSON object: a body of JSON `null` is
 * 400 `invalid_body` (a validator cannot tell it from no body), and a body that is not JSON at all
 * (the `text/plain` Fastify parses by default) is 415, as any other media type is.
 */
export function jsonObjectBody(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (request.body === null) return done(new ApiError('invalid_body', notAnObject(null)))
  // A JSON string is a string too: only the text parser's output is told apart, by its media type.
  if (typeof request.body !== 'string' || JSON_MEDIA_TYPE.test(request.headers['content-type'] ?? '')) return done()
  if (request.body !== '') {
    return done(new ApiError('unsupported_media_type', BODY_MUST_BE_JSON))
  }
  request.body = undefined // an empty text body: no body
  done()
}

const JSON_MEDIA_TYPE = /^\s*application\/json\s*(;|$)/i

function refuse(message: string): { error: ApiError } {
  return { error: new ApiError('invalid_body', message) }
}

function notAnObject(body: unknown): string {
  const got = body === null ? 'null' : Array.isArray(body) ? 'an array' : typeof body
  return `The body must be a JSON object (or empty); got ${got}.`
}
