import { ApiError } from '../errors.js'

// An order's entity tag is its version (domain/orders.ts), quoted: `"3"`. Always strong: two
// representations of one version are the same bytes.

/** The ETag of an order at `version`. */
export function etag(version: number): string {
  return `"${version}"`
}

/** One entity tag of a list (RFC 9110 §8.8.3): W/ for a weak one, then any visible characters but `"` within quotes. */
const ENTITY_TAG = /^\s*(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"\s*$/
const VERSION = /^[1-9][0-9]{0,9}$/

/**
 * The version an `If-Match` requires (RFC 9110 §13.1.1), or undefined for none (no header, or `*`:
 * any current order). One strong ETag of this API's form, such as `"3"`; anything else, a list
 * included, is 400 `invalid_if_match`: a write names the one version it read. A weak tag never
 * matches under If-Match's strong comparison, so it is refused too rather than always failing.
 */
export function expectedVersion(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined
  const value = Array.isArray(header) ? header.join(',') : header
  if (value.trim() === '*') return undefined
  const tag = ENTITY_TAG.exec(value)
  if (tag === null || tag[1] !== undefined || !VERSION.test(tag[2]!)) throw new ApiError('invalid_if_match')
  const version = Number(tag[2])
  if (version > 2_147_483_647) throw new ApiError('invalid_if_match')
  return version
}

/**
 * Whether an `If-None-Match` (RFC 9110 §13.1.2) matches the order at `version`, so that a GET is
 * answered 304: `*`, or a list holding its ETag (weak comparison: W/"3" matches "3").
 */
export function noneMatchHits(header: string | string[] | undefined, version: number): boolean {
  if (header === undefined) return false
  const value = Array.isArray(header) ? header.join(',') : header
  if (value.trim() === '*') return true
  const current = `"${version}"`
  return value.split(',').some((tag) => tag.trim().replace(/^W\//, '') === current)
}

/** 412 for a write whose If-Match names another version than `current`: the body names the current one. */
export function preconditionFailed(current: number): ApiError {
  return new ApiError(
    'precondition_failed',
    `The order is at version ${current} (ETag "${current}"), not the one If-Match names; nothing was changed. Read it again and retry with its ETag.`,
    { etag: etag(current) },
  )
}
