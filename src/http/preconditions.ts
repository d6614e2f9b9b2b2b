import { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ExpectedVersion, PreconditionFailed } from '../domain/orders.js'
import { ApiError } from '../errors.js'
import { ENTITY_TAGS_PATTERN } from '../schemas/order-v2.js'

// An order's entity tag is its version (domain/orders.ts), quoted: `"3"`. Always strong: two
// representations of one version are the same bytes. The v1 list has its own (routes/orders.ts);
// If-None-Match and the 304 are the same for both.

/** The ETag of an order at `version`. */
export function etag(version: number): string {
  return `"${version}"`
}

// The header schemas' pattern (ENTITY_TAGS_PATTERN) refuses a malformed list before a route reads it.
const ENTITY_TAGS = new RegExp(ENTITY_TAGS_PATTERN)

/** A parsed list: `*`, or its tags, each with whether it is weak. Undefined for a header absent or malformed. */
type EntityTags = '*' | { weak: boolean; opaque: string }[]

function entityTags(header: string | string[] | undefined): EntityTags | undefined {
  // Node joins a header sent twice with ", ": one list, as RFC 9110 §5.3 has it.
  const value = Array.isArray(header) ? header.join(', ') : header
  if (value === undefined || !ENTITY_TAGS.test(value)) return undefined
  if (value.trim() === '*') return '*'
  return [...value.matchAll(/(W\/)?("[^"]*")/g)].map((tag) => ({ weak: tag[1] !== undefined, opaque: tag[2]! }))
}

/** If-Match's strong comparison (§13.1.1): a weak tag never matches. */
const matchesStrongly = (tags: EntityTags, current: string): boolean => tags === '*' || tags.some((tag) => !tag.weak && tag.opaque === current)
/** If-None-Match's weak comparison (§13.1.2): W/"3" matches "3". */
const matchesWeakly = (tags: EntityTags, current: string): boolean => tags === '*' || tags.some((tag) => tag.opaque === current)

/**
 * Whether an `If-None-Match` holds the `current` ETag, so that a GET or HEAD is answered 304: `*`,
 * or a list holding it. A malformed one holds nothing (the v1 list takes any header; v2 refuses a
 * malformed one first).
 */
export function noneMatchHits(header: string | string[] | undefined, current: string): boolean {
  const tags = entityTags(header)
  return tags !== undefined && matchesWeakly(tags, current)
}

/** Whether an `If-Match` given excludes the `current` ETag: a GET or HEAD is then 412, as a write is. */
export function matchFails(header: string | string[] | undefined, current: string): boolean {
  const tags = entityTags(header)
  return tags !== undefined && !matchesStrongly(tags, current)
}

/**
 * A v2 write to an order under the request's preconditions, in RFC 9110 §13.2.2's order: If-Match,
 * then If-None-Match (412 for a write). Both are judged after the order's existence (404 first) and
 * before its state: a write they rule out is 412 even where it would be 409 or change nothing.
 *
 * No header, `If-Match: *` or one ETag of this API (`"3"`, what a client sends that read the order)
 * go to the store as the version the write requires (`expected`), checked in the write's own
 * transaction. Anything else (a list, a weak or foreign tag, which never matches, If-None-Match)
 * is judged against the order as `current` reads it: ruled out, 412 naming that version; allowed,
 * the write requires that version, so that an order changed between the read and the write is 412
 * too, never a write the preconditions did not see.
 */
export async function conditionalWrite<Result extends { outcome: string }>(
  headers: { 'if-match'?: string | string[]; 'if-none-match'?: string | string[] },
  current: () => Promise<number | undefined>,
  write: (expected: ExpectedVersion) => Promise<Result>,
): Promise<Result | NotFound | RuledOut> {
  const match = entityTags(headers['if-match'])
  const noneMatch = entityTags(headers['if-none-match'])
  if (noneMatch === undefined) {
    if (match === undefined || match === '*') return write(undefined)
    const only = match.length === 1 && !match[0]!.weak ? versionOf(match[0]!.opaque) : undefined
    if (only !== undefined) return write(only)
  }
  const version = await current()
  if (version === undefined) return { outcome: 'not_found' }
  const tag = etag(version)
  if (match !== undefined && !matchesStrongly(match, tag)) return { outcome: 'precondition_failed', version }
  if (noneMatch !== undefined && matchesWeakly(noneMatch, tag)) {
    return { outcome: 'precondition_failed', version, message: noneMatchMessage(noneMatch, version) }
  }
  return write(version)
}

type NotFound = { outcome: 'not_found' }
/** PreconditionFailed, with the message of an If-None-Match that ruled the write out. */
type RuledOut = PreconditionFailed & { message?: string }

/** The version an ETag of this API names (`"3"`), or undefined for a tag no order has. */
function versionOf(opaque: string): number | undefined {
  if (!/^"[1-9][0-9]{0,9}"$/.test(opaque)) return undefined
  const version = Number(opaque.slice(1, -1))
  return version <= 2_147_483_647 ? version : undefined
}

function noneMatchMessage(tags: EntityTags, version: number): string {
  const why = tags === '*' ? 'If-None-Match: * asks that it does not exist' : 'If-None-Match names that version'
  return `The order is at version ${version} (ETag "${version}"), and ${why}; nothing was changed.`
}

/**
 * 304 with no body at all: no `null` serialized, so neither Content-Type nor a Content-Length the
 * 200 would not have (RFC 9110 §8.6). Fastify's generated HEAD route writes `Content-Length: 0` on
 * a reply sent without a payload, whatever its status; an empty stream is a payload it drains
 * without writing one.
 */
export function notModified(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.code(304).send(request.method === 'HEAD' ? Readable.from([]) : undefined)
}

/**
 * 412 for a request whose preconditions rule out the order at `current`: the body and the ETag name
 * the current version; the message, an If-Match that names another one unless given.
 */
export function preconditionFailed(
  current: number,
  message = `The order is at version ${current} (ETag "${current}"), not the one If-Match names; nothing was changed. Read it again and retry with its ETag.`,
): ApiError {
  return new ApiError('precondition_failed', message, { etag: etag(current) })
}
