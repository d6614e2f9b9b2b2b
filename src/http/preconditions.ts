import { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'

// An order's entity tag is its version (domain/orders.ts), quoted: `"3"`. Always strong: two
// representations of one version are the same bytes. The v1 list has its own (routes/orders.ts);
// If-None-Match and the 304 are the same for both.

/** The ETag of an order at `version`. */
export function etag(version: number): string {
  return `"${version}"`
}

/**
 * The version an `If-Match` requires (RFC 9110 §13.1.1), or undefined for none (no header, or `*`:
 * any current order). Its form, one strong ETag of this API such as `"3"` (a list, a weak tag, which
 * never matches under If-Match's strong comparison, or anything else is 400 `invalid_if_match`), is
 * the pattern of IfMatchHeaders, which every route that reads it validates the header by
 * (strict-headers.ts). A version beyond int32, which no order reaches, is refused here.
 */
export function expectedVersion(header: string | undefined): number | undefined {
  if (header === undefined || header === '*') return undefined
  const version = Number(header.slice(1, -1))
  if (version > 2_147_483_647) throw new ApiError('invalid_if_match')
  return version
}

/**
 * Whether an `If-None-Match` (RFC 9110 §13.1.2) holds the `current` ETag, so that a GET or HEAD is
 * answered 304: `*`, or a list holding it (weak comparison: W/"3" matches "3").
 */
export function noneMatchHits(header: string | string[] | undefined, current: string): boolean {
  if (header === undefined) return false
  const value = Array.isArray(header) ? header.join(',') : header
  if (value.trim() === '*') return true
  return value.split(',').some((tag) => tag.trim().replace(/^W\//, '') === current)
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

/** 412 for a write whose If-Match names another version than `current`: the body names the current one. */
export function preconditionFailed(current: number): ApiError {
  return new ApiError(
    'precondition_failed',
    `The order is at version ${current} (ETag "${current}"), not the one If-Match names; nothing was changed. Read it again and retry with its ETag.`,
    { etag: etag(current) },
  )
}
