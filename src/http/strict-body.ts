import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { isLosslessNumber, stringify as stringifyLossless } from 'lossless-json'
import { parseDateTime } from '../domain/date-time.js'
import { INT64_MAX, INT64_MIN, parseInt64 } from '../domain/int64.js'
import { MAX_METADATA_KEYS, metadataKeyProblem, metadataValueProblem } from '../domain/order-metadata.js'
import { ApiError } from '../errors.js'
import { shorten } from './shorten.js'

/** The part of a TypeBox object schema a body is validated from. */
export interface BodySchema {
  properties?: Record<string, PropertySchema>
  required?: readonly string[]
}
/**
 * The property kinds a body may have: a closed set of strings (a string `enum`, or a union of string
 * literals), an int64 (exact, however large), a bounded integer, an RFC 3339 date-time, a string of
 * bounded length, a boolean, an array of distinct strings from a closed set, an order's metadata (an
 * object of strings: domain/order-metadata.ts), and any of these or null (a union with `null`, or
 * `nullable`, as a merge patch removes a field).
 */
interface PropertySchema {
  type?: string
  /** OpenAPI 3.0's way of allowing null, where a union with null would show as an anyOf in the document. */
  nullable?: boolean
  format?: string
  enum?: readonly unknown[]
  anyOf?: readonly (PropertySchema & { const?: unknown })[]
  additionalProperties?: PropertySchema | boolean
  maxProperties?: number
  minimum?: number
  maximum?: number
  minLength?: number
  maxLength?: number
  minItems?: number
  uniqueItems?: boolean
  items?: PropertySchema
}

/** A field's reading: its value as the route gets it, or why it is refused. */
type FieldReader = (value: unknown) => { value: unknown } | { problem: string }

/**
 * Validates an optional JSON object body from its schema, strictly: a field the schema does not
 * name, or a bad value, is 400 `invalid_body` naming it. Nothing is coerced from another JSON type
 * or removed (Fastify's default validator would drop unknown fields without a word). The app's JSON
 * parser hands numbers over as their source text (lossless-json), so an int64 is exact here; a
 * date-time is handed on as stored (`toISOString()`). No body at all is valid when no field is
 * required: Fastify hands validators an absent body as `null` (a JSON `null` is refused before, by
 * {@link jsonObjectBody}).
 */
export function strictBodyValidator(schema: BodySchema): (body: unknown) => { value: unknown } | { error: ApiError } {
  const readers = new Map(Object.entries(schema.properties ?? {}).map(([name, property]) => [name, fieldReader(name, property)]))
  const required = schema.required ?? []
  const names = [...readers.keys()].map((name) => `"${name}"`).join(', ')
  const missingBody = bodyRequired(required, [...readers.keys()].filter((name) => !required.includes(name)))
  return (body) => {
    if (body === null || body === undefined) {
      return required.length === 0 ? { value: undefined } : refuse(missingBody)
    }
    if (typeof body !== 'object' || Array.isArray(body) || isLosslessNumber(body)) return refuse(notAnObject(body))
    const value: Record<string, unknown> = {}
    for (const [name, given] of Object.entries(body)) {
      const read = readers.get(name)
      if (read === undefined) {
        return refuse(readers.size === 0 ? `The body must be empty or {}; got the field "${shorten(name)}".` : `Unknown field "${shorten(name)}" in the body; it may have ${names}.`)
      }
      const field = read(given)
      if ('problem' in field) return refuse(field.problem)
      value[name] = field.value
    }
    for (const name of required) if (!Object.hasOwn(body, name)) return refuse(`"${name}" is required in the body.`)
    return { value }
  }
}

function fieldReader(name: string, property: PropertySchema): FieldReader {
  const nullable = property.anyOf?.length === 2 ? property.anyOf.findIndex((member) => member.type === 'null') : -1
  if (nullable !== -1 || property.nullable === true) {
    const read = fieldReader(name, nullable !== -1 ? property.anyOf![1 - nullable]! : { ...property, nullable: false })
    return (value) => (value === null ? { value: null } : read(value))
  }
  if (property.type === 'object' && typeof property.additionalProperties === 'object') return metadataReader(name, property)
  const values = property.enum ?? property.anyOf?.map((member) => member.const)
  if (values !== undefined && values.length > 0 && values.every((value): value is string => typeof value === 'string')) {
    return (value) =>
      typeof value === 'string' && values.includes(value) ? { value } : { problem: `"${name}" must be one of ${values.join(', ')}; got ${describe(value)}.` }
  }
  if (property.type === 'integer' && property.format === 'int64') {
    const min = property.minimum === undefined ? INT64_MIN : BigInt(property.minimum)
    const problem = `"${name}" must be an integer from ${min} to ${INT64_MAX}`
    return (value) => {
      const id = isLosslessNumber(value) ? parseInt64(value.value) : undefined
      return id !== undefined && id >= min ? { value: id } : { problem: `${problem}; got ${describe(value)}.` }
    }
  }
  if (property.type === 'integer' && property.minimum !== undefined && property.maximum !== undefined) {
    const { minimum, maximum } = property
    return (value) => {
      const text = isLosslessNumber(value) ? value.value : ''
      const number = /^-?[0-9]{1,15}$/.test(text) ? Number(text) : NaN
      return number >= minimum && number <= maximum
        ? { value: number }
        : { problem: `"${name}" must be an integer from ${minimum} to ${maximum}; got ${describe(value)}.` }
    }
  }
  if (property.type === 'string' && property.format === 'date-time') {
    return (value) => {
      const instant = typeof value === 'string' ? parseDateTime(value) : undefined
      return instant !== undefined
        ? { value: instant }
        : { problem: `"${name}" must be an RFC 3339 date-time with a time zone, such as "2026-11-25T10:00:00Z"; got ${describe(value)}.` }
    }
  }
  if (property.type === 'string' && property.format === undefined) {
    const { minLength = 0, maxLength = Infinity } = property
    const length = maxLength === Infinity ? `at least ${minLength}` : `${minLength} to ${maxLength}`
    return (value) =>
      typeof value === 'string' && value.length >= minLength && value.length <= maxLength
        ? { value }
        : { problem: `"${name}" must be a string of ${length} characters; got ${describe(value)}.` }
  }
  if (property.type === 'boolean') {
    return (value) => (typeof value === 'boolean' ? { value } : { problem: `"${name}" must be true or false; got ${describe(value)}.` })
  }
  if (property.type === 'array' && property.items !== undefined) {
    const read = fieldReader(`${name}[]`, property.items)
    const { minItems = 0, uniqueItems = false } = property
    return (value) => {
      if (!Array.isArray(value) || value.length < minItems) {
        return { problem: `"${name}" must be an array of at least ${minItems} item${minItems === 1 ? '' : 's'}; got ${describe(value)}.` }
      }
      const items: unknown[] = []
      for (const given of value) {
        const item = read(given)
        if ('problem' in item) return item
        if (uniqueItems && items.includes(item.value)) return { problem: `"${name}" has ${describe(given)} more than once.` }
        items.push(item.value)
      }
      return { value: items }
    }
  }
  throw new Error(`body field "${name}": no strict validator for this schema`)
}

/**
 * An order's metadata: an object of at most `maxProperties` keys, each key and value by
 * order-metadata.ts's rules, a value null too where the schema allows it (a patch's removal). Read
 * into a Map, in the body's order: no key, `__proto__` included, is ever assigned to an object here.
 */
function metadataReader(name: string, property: PropertySchema): FieldReader {
  const values = property.additionalProperties as PropertySchema
  const nullable = values.anyOf?.some((member) => member.type === 'null') === true
  const max = property.maxProperties ?? MAX_METADATA_KEYS
  return (value) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || isLosslessNumber(value)) {
      return { problem: `"${name}" must be an object of string values; got ${describe(value)}.` }
    }
    const entries = Object.entries(value)
    if (entries.length > max) return { problem: `"${name}" must have at most ${max} keys; got ${entries.length}.` }
    const metadata = new Map<string, string | null>()
    for (const [key, given] of entries) {
      const keyProblem = metadataKeyProblem(key)
      if (keyProblem !== undefined) return { problem: `"${name}": ${keyProblem}.` }
      if (given === null && nullable) {
        metadata.set(key, null)
        continue
      }
      const valueProblem = metadataValueProblem(key, given)
      const orNull = nullable && typeof given !== 'string' ? ' (or null, to remove the key)' : ''
      if (valueProblem !== undefined) return { problem: `"${name}": ${valueProblem}${orNull}; got ${describe(given)}.` }
      metadata.set(key, given as string)
    }
    return { value: metadata }
  }
}

/** A value as the client wrote it (numbers digit for digit), cut to a length fit for a message. */
function describe(value: unknown): string {
  return shorten(stringifyLossless(value) ?? String(value))
}

/** The 415 message for a body of any media type but JSON (text/plain here; the others in error-handling.ts; a merge patch off a PATCH in app.ts). */
export const BODY_MUST_BE_JSON = 'The request body must be JSON, sent with Content-Type: application/json.'

/**
 * A preValidation hook for a route whose body is a JSON object: a body of JSON `null` is 400
 * `invalid_body` (a validator cannot tell it from no body), and a body that is not JSON at all is
 * 415 (textBody).
 */
export function jsonObjectBody(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (request.body === null) return done(new ApiError('invalid_body', notAnObject(null)))
  textBody(request, reply, done)
}

/**
 * A preValidation hook for a route that takes JSON or no body: a body Fastify's default text parser
 * read (`text/plain`) is 415, as any other media type is; an empty one is no body.
 */
export function textBody(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  // A JSON string is a string too: only the text parser's output is told apart, by its media type.
  const type = request.headers['content-type'] ?? ''
  if (typeof request.body !== 'string' || JSON_MEDIA_TYPE.test(type) || MERGE_PATCH.test(type)) return done()
  if (request.body !== '') return done(new ApiError('unsupported_media_type', BODY_MUST_BE_JSON))
  request.body = undefined // an empty text body: no body
  done()
}

const JSON_MEDIA_TYPE = /^\s*application\/json\s*(;|$)/i

/**
 * The body limit of the writes that take an order's metadata (placeOrder, updateOrder): 50 values of
 * 500 characters written as most encoders write them, escaped (`\uXXXX`, 12 bytes for a character
 * beyond the BMP), and their keys (40 characters, 240 bytes escaped): 312,000 bytes at most, and room
 * for whitespace. Every other body keeps the app's 16 KiB.
 */
export const METADATA_BODY_LIMIT = 512 * 1024

/** A JSON Merge Patch (RFC 7396): JSON, taken by updateOrder only. */
export const MERGE_PATCH_MEDIA_TYPE = 'application/merge-patch+json'
const MERGE_PATCH = /^\s*application\/merge-patch\+json\s*(;|$)/i

/** The message for a missing body: the fields it must have, then those it may (never one looking required that is not). */
function bodyRequired(required: readonly string[], optional: readonly string[]): string {
  const optionally = optional.length === 0 ? '' : ` (and optionally ${listed(optional)})`
  return `The body is required, with ${listed(required)}${optionally}.`
}

/** `"a"`, `"a" and "b"`, `"a", "b" and "c"`. */
function listed(names: readonly string[]): string {
  const quoted = names.map((name) => `"${name}"`)
  return quoted.length === 1 ? quoted[0]! : `${quoted.slice(0, -1).join(', ')} and ${quoted.at(-1)}`
}

function refuse(message: string): { error: ApiError } {
  return { error: new ApiError('invalid_body', message) }
}

function notAnObject(body: unknown): string {
  const got = body === null ? 'null' : Array.isArray(body) ? 'an array' : isLosslessNumber(body) ? 'a number' : typeof body
  return `The body must be a JSON object; got ${got}.`
}
