import { looksLikeApiKey } from '../domain/api-keys.js'
import { parseDateTime } from '../domain/date-time.js'
import { parseInt64 } from '../domain/int64.js'
import { metadataKeyProblem, metadataValueProblem } from '../domain/order-metadata.js'
import { ApiError } from '../errors.js'
import { shorten } from './shorten.js'

/** The part of a TypeBox object schema a query is validated from. */
export interface QuerySchema {
  properties?: Record<string, PropertySchema>
}
interface PropertySchema {
  type?: string
  format?: string
  pattern?: string
  minimum?: number
  maximum?: number
  default?: unknown
  maxProperties?: number
}

type Parsed = { value: unknown } | { problem: string }

/**
 * Validates a query string from its schema, strictly: a parameter the schema does not name, one
 * given more than once, or a value not of its type is 400 `invalid_parameter` naming it (a typo
 * such as `petid` must not silently widen a filter). Values are converted to what the schema says:
 * integers (int64 ones exactly, as bigint), booleans (`true`/`false`), strings matching their
 * `pattern` or `date-time` format; a plain string (neither) is left to its route. An `object`
 * property is an order's metadata given as OpenAPI's deepObject, one parameter per key
 * (`metadata[KEY]=VALUE`; Fastify's parser hands each over under that very name): read into a Map in
 * the order given, each key and value by order-metadata.ts's rules, at most `maxProperties` keys.
 * Absent parameters take their `default`.
 */
export function strictQueryValidator(schema: QuerySchema): (query: unknown) => { value: Record<string, unknown> } | { error: ApiError } {
  const properties = Object.entries(schema.properties ?? {})
  const parsers = new Map(properties.filter(([, property]) => property.type !== 'object').map(([name, property]) => [name, parserFor(name, property)]))
  const deepObjects = new Map(properties.filter(([, property]) => property.type === 'object').map(([name, property]) => [name, property]))
  return (query) => {
    const raw = (query ?? {}) as Record<string, string | string[]>
    const value: Record<string, unknown> = {}
    for (const [name, given] of Object.entries(raw)) {
      const parse = parsers.get(name)
      const member = DEEP_OBJECT_MEMBER.exec(name)
      const object = member === null ? undefined : deepObjects.get(member[1]!)
      if (parse === undefined && object === undefined) return refuse(unknownParameter(name, deepObjects))
      if (typeof given !== 'string') return refuse(`The query parameter "${shorten(name)}" is given more than once.`)
      if (object !== undefined) {
        const [, objectName, key] = member as RegExpExecArray & [string, string, string]
        const members = (value[objectName] ??= new Map<string, string>()) as Map<string, string>
        const problem = memberProblem(objectName, object, members, key, given)
        if (problem !== undefined) return refuse(problem)
        members.set(key, given)
        continue
      }
      const parsed = parse!(given)
      if ('problem' in parsed) return refuse(parsed.problem)
      value[name] = parsed.value
    }
    for (const [name, property] of properties) {
      if (value[name] === undefined && property.default !== undefined) value[name] = property.default
    }
    return { value }
  }
}

/**
 * Why a URL's query string is malformed, or undefined: a `%` not followed by two hex digits, or
 * escapes that are not UTF-8. Fastify's parser keeps such a value as sent, so `metadata[k]=%FF`
 * would match the text `%FF`. (A path with one is refused before routing, by Fastify.)
 */
export function queryEncodingError(url: string): ApiError | undefined {
  const query = url.indexOf('?')
  if (query === -1 || !url.includes('%', query)) return undefined
  try {
    decodeURIComponent(url.slice(query + 1))
    return undefined
  } catch {
    return new ApiError('bad_request', 'The query string has bad percent-encoding: each % must begin an escape of two hex digits, of UTF-8 bytes.')
  }
}

function unknownParameter(name: string, deepObjects: ReadonlyMap<string, PropertySchema>): string {
  if (deepObjects.has(name)) return `${name} is given one key at a time: ${name}[KEY]=VALUE.`
  return looksLikeApiKey(name) ? KEY_IN_QUERY : `Unknown query parameter "${shorten(name)}".`
}

/** `name[key]`: a member of a deepObject parameter (the key may be anything, checked after). */
const DEEP_OBJECT_MEMBER = /^([A-Za-z][A-Za-z0-9]*)\[(.*)\]$/s

/** Why `name[key]=given` cannot join the members already read into `map`, or undefined. */
function memberProblem(name: string, property: PropertySchema, map: ReadonlyMap<string, string>, key: string, given: string): string | undefined {
  const problem = metadataKeyProblem(key) ?? metadataValueProblem(key, given)
  if (problem !== undefined) return `${name}[${shorten(key)}]: ${problem}.`
  const max = property.maxProperties
  if (max !== undefined && map.size >= max) return `${name}[${key}] is one key too many: ${name} takes at most ${max} keys.`
  return undefined
}

/** A key sent as a query parameter's name (`?pso_…`) is never repeated, in the answer or the log: where it goes is. */
const KEY_IN_QUERY = 'An API key was sent in the query string, where it is not read (nor repeated); send it as "Authorization: Bearer <API_KEY>".'

function refuse(message: string): { error: ApiError } {
  return { error: new ApiError('invalid_parameter', message) }
}

function parserFor(name: string, property: PropertySchema): (text: string) => Parsed {
  if (property.type === 'integer' && property.format === 'int64') {
    return (text) => {
      const value = parseInt64(text)
      return value === undefined ? { problem: `${name} must be a decimal integer in the int64 range.` } : { value }
    }
  }
  if (property.type === 'integer') {
    const { minimum = 0, maximum = Number.MAX_SAFE_INTEGER } = property
    return (text) => {
      const value = /^[0-9]{1,15}$/.test(text) ? Number(text) : NaN
      return value >= minimum && value <= maximum ? { value } : { problem: `${name} must be an integer from ${minimum} to ${maximum}.` }
    }
  }
  if (property.type === 'boolean') {
    return (text) => (text === 'true' || text === 'false' ? { value: text === 'true' } : { problem: `${name} must be true or false.` })
  }
  if (property.type === 'string' && property.format === 'date-time') {
    return (text) => {
      // A space before the offset stands for `+`: an unencoded `+` in a query string reads as a space.
      const value = parseDateTime(text.replace(/ (?=\d{2}:\d{2}$)/, '+'))
      return value === undefined ? { problem: `${name} must be an RFC 3339 date-time, such as 2026-11-25T10:00:00Z.` } : { value }
    }
  }
  if (property.type === 'string' && property.pattern !== undefined) {
    const pattern = new RegExp(property.pattern)
    const problem = enumProblem(name, property.pattern) ?? `${name} has an invalid value.`
    return (text) => (pattern.test(text) ? { value: text } : { problem })
  }
  // A string with neither a pattern nor a format is passed on as it is: its route checks it and
  // answers with a code of its own (the event feed's `after`: 400 invalid_cursor).
  if (property.type === 'string' && property.format === undefined) return (text) => ({ value: text })
  throw new Error(`query parameter "${name}": no strict parser for this schema`)
}

/**
 * The message for a parameter whose pattern is a closed set of words, one (`^(a|b)$`) or a comma
 * list (`^(a|b)(,(a|b))*$`): it names the values, which the pattern alone does not tell a client.
 */
function enumProblem(name: string, pattern: string): string | undefined {
  const one = /^\^\(([a-z_]+(?:\|[a-z_]+)*)\)\$$/.exec(pattern)
  if (one !== null) return `${name} must be one of ${one[1]!.split('|').join(', ')}.`
  const list = /^\^\(([a-z_]+(?:\|[a-z_]+)*)\)\(,\(\1\)\)\*\$$/.exec(pattern)
  if (list !== null) return `${name} must be one or more of ${list[1]!.split('|').join(', ')}, separated by commas.`
  return undefined
}
