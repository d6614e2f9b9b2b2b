import type { FastifyRequest } from 'fastify'
import { parse as parseLosslessJson } from 'lossless-json'
import { ApiError } from '../errors.js'
import { invalidJson } from './json-syntax-error.js'
import { shorten } from './shorten.js'

/** RFC 8259 §8.1: JSON exchanged between systems is UTF-8. `fatal`: a malformed sequence throws, never becomes U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true })
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i

/**
 * The JSON body parser, for application/json and (v2's PATCH) application/merge-patch+json, read as
 * bytes. Only v2's writes read a body, and some take none: a client sending `Content-Type:
 * application/json` with an empty body (common on DELETE) is not wrong. What is refused, before a
 * route sees it: a body in a content coding (415, `Accept-Encoding: identity`: none is decoded
 * here), a charset other than UTF-8 (415), bytes that are not UTF-8 and malformed JSON (400
 * `invalid_body`, saying why), and a member given twice. Numbers stay their source text
 * (lossless-json), so an int64 in a body is exact however large (strict-body.ts reads it).
 */
export function parseJsonBody(request: FastifyRequest, body: Buffer, done: (error: Error | null, body?: unknown) => void): void {
  if (body.length === 0) return done(null, undefined)
  const refusal = unreadable(request)
  if (refusal !== undefined) return done(refusal, undefined)
  let text: string
  try {
    text = UTF8.decode(body)
  } catch {
    return done(new ApiError('invalid_body', 'The request body is not valid UTF-8, which JSON must be (RFC 8259).'), undefined)
  }
  let parsed: unknown
  try {
    parsed = parseLosslessJson(text, null, { onDuplicateKey: duplicateField })
  } catch (error) {
    return done(error instanceof ApiError ? error : invalidJson(error, text), undefined)
  }
  done(null, parsed)
}

/** 415 for a body this parser cannot read as it is sent: compressed, or in another charset than UTF-8. */
function unreadable(request: FastifyRequest): ApiError | undefined {
  const coding = request.headers['content-encoding']?.trim().toLowerCase()
  if (coding !== undefined && coding !== '' && coding !== 'identity') {
    return new ApiError(
      'unsupported_media_type',
      `The request body is sent with Content-Encoding: ${shorten(coding)}, which this API does not decode; send it uncompressed.`,
      { 'accept-encoding': 'identity' },
    )
  }
  const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase()
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return new ApiError('unsupported_media_type', `The request body must be JSON in UTF-8; charset=${shorten(charset)} is not accepted.`)
  }
  return undefined
}

/** Two values for one field: which one the client meant is not ours to guess. */
function duplicateField({ key }: { key: string }): never {
  throw new ApiError('invalid_body', `The field "${shorten(key)}" appears twice in the body.`)
}
