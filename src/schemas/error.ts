import Type from 'typebox'
import { ERROR_CODES, type ErrorBody } from '../errors.js'

/** The Error object: the body of every error response, of every status. */
export const ErrorSchema = Type.Object(
  {
    code: Type.String({ description: 'Machine-readable error code', enum: ERROR_CODES }),
    message: Type.String({ description: 'Human-readable description of the error' }),
    status: Type.Integer({ description: 'The HTTP status code' }),
  },
  {
    $id: 'Error',
    additionalProperties: false,
    examples: [{ code: 'order_not_found', message: 'The order does not exist or has been cancelled.', status: 404 }],
  },
)

const ErrorRef = Type.Unsafe<ErrorBody>({ $ref: 'Error#' })

const UNAUTHORIZED = 'The API key is missing, malformed, unknown, expired or revoked (`unauthorized`)'

/**
 * Response schemas for the given error statuses, each the Error object. Every operation that uses it
 * needs a key, so 401 is always among them, described as on every operation unless given.
 */
export function errorResponses(description: Record<number, string>) {
  return Object.fromEntries(
    Object.entries({ 401: UNAUTHORIZED, ...description }).map(([status, text]) => [status, { ...ErrorRef, description: text }]),
  )
}
