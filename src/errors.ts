/**
 * The closed set of error codes the API answers with. Every error response, whatever produced it,
 * is `{ code, message, status }` with one of these codes; README "Error codes" lists them.
 */
export const ERRORS = {
  bad_request: { status: 400, message: 'The request is malformed.' },
  invalid_order_id: { status: 400, message: 'orderId must be a decimal integer in the int64 range.' },
  invalid_pet_id: { status: 400, message: 'petId must be a decimal integer in the int64 range.' },
  invalid_endpoint_id: { status: 400, message: 'endpointId must be a decimal integer in the int64 range.' },
  invalid_body: { status: 400, message: 'The request body is not valid JSON.' },
  invalid_parameter: { status: 400, message: 'A query parameter is unknown, repeated or has an invalid value.' },
  invalid_idempotency_key: {
    status: 400,
    message: 'The Idempotency-Key header must be sent once, with 1 to 255 visible ASCII characters (no spaces).',
  },
  invalid_if_match: {
    status: 400,
    message: 'If-Match must be * or a list of ETags, such as "3".',
  },
  invalid_if_none_match: {
    status: 400,
    message: 'If-None-Match must be * or a list of ETags, such as "3".',
  },
  invalid_cursor: {
    status: 400,
    message: 'The cursor is not valid here: it was altered, is not from this API, or was issued for other filters.',
  },
  invalid_webhook_url: {
    status: 400,
    message: 'The webhook URL is not allowed: it must be an https URL whose host resolves to public addresses only.',
  },
  unauthorized: { status: 401, message: 'A valid API key is required: send "Authorization: Bearer <API_KEY>".' },
  insufficient_scope: { status: 403, message: 'The API key does not have the scope this operation requires.' },
  not_found: { status: 404, message: 'No resource exists at this path.' },
  order_not_found: { status: 404, message: 'The order does not exist or has been cancelled.' },
  pet_not_found: { status: 404, message: 'The pet does not exist.' },
  webhook_endpoint_not_found: { status: 404, message: 'No webhook endpoint has this id.' },
  method_not_allowed: { status: 405, message: 'This method is not allowed on this resource.' },
  request_timeout: { status: 408, message: 'The request was not received in time.' },
  order_already_shipped: { status: 409, message: 'The order has already shipped and cannot be cancelled.' },
  order_cancelled: { status: 409, message: 'The order has been cancelled; it cannot be shipped or completed.' },
  order_not_shipped: { status: 409, message: 'The order has not shipped yet; only a shipped order can be completed.' },
  order_not_pending: {
    status: 409,
    message: 'The order has shipped or been cancelled: its petId, quantity and shipDate can no longer change (its metadata can).',
  },
  idempotency_key_in_use: {
    status: 409,
    message: 'A request with this Idempotency-Key is still being processed; retry after the time given in Retry-After.',
  },
  order_ids_exhausted: {
    status: 409,
    message: 'No order id above 9223372036854775807 is left: the store holds an order with the greatest int64 id. Nothing was placed.',
  },
  webhook_endpoint_limit: {
    status: 409,
    message: 'As many webhook endpoints exist as WEBHOOK_MAX_ENDPOINTS allows; delete one before creating another.',
  },
  ping_in_flight: {
    status: 409,
    message: 'A ping to this webhook endpoint is still in flight; send another once it is answered (within WEBHOOK_TIMEOUT_MS).',
  },
  gone: { status: 410, message: 'This operation has reached its sunset date and is no longer available.' },
  events_expired: {
    status: 410,
    message: 'Events after this cursor have been deleted by retention; read the feed again from its oldest event (without after).',
  },
  precondition_failed: { status: 412, message: 'The order is not at the version If-Match names; nothing was changed.' },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  uri_too_long: { status: 414, message: 'The request URI is too long.' },
  unsupported_media_type: { status: 415, message: 'The request body has an unsupported content type.' },
  idempotency_key_reused: {
    status: 422,
    message: 'This Idempotency-Key was used with another request body; a key identifies one request. Use a new key for a new order.',
  },
  rate_limited: { status: 429, message: 'Too many requests; retry after the time given in Retry-After.' },
  headers_too_large: { status: 431, message: 'The request header fields are too large.' },
  internal_error: { status: 500, message: 'An internal error occurred.' },
  service_unavailable: { status: 503, message: 'The service is temporarily unavailable; retry shortly.' },
} as const satisfies Record<string, { status: number; message: string }>

export type ErrorCode = keyof typeof ERRORS

export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[]

/** Codes only v2 answers with; v1 (and its document) never names them. */
const V2_ONLY_ERROR_CODES: readonly ErrorCode[] = [
  'invalid_parameter',
  'invalid_cursor',
  'invalid_idempotency_key',
  'invalid_if_match',
  'invalid_if_none_match',
  'order_cancelled',
  'order_not_pending',
  'precondition_failed',
  'order_not_shipped',
  'idempotency_key_in_use',
  'order_ids_exhausted',
  'events_expired',
  'idempotency_key_reused',
  'invalid_endpoint_id',
  'invalid_webhook_url',
  'webhook_endpoint_not_found',
  'webhook_endpoint_limit',
  'ping_in_flight',
]

/** Codes only v1 answers with (its pets and their sunset); v2 (and its document) never names them. */
export const V1_ONLY_ERROR_CODES: readonly ErrorCode[] = ['invalid_pet_id', 'pet_not_found', 'gone']

/** The codes v1 can answer with, as its document lists them. */
export const V1_ERROR_CODES = ERROR_CODES.filter((code) => !V2_ONLY_ERROR_CODES.includes(code))

/** The codes v2 can answer with, as its document lists them. */
export const V2_ERROR_CODES = ERROR_CODES.filter((code) => !V1_ONLY_ERROR_CODES.includes(code))

/** The body of every error response. */
export interface ErrorBody {
  code: ErrorCode
  message: string
  status: number
}

/** An error that maps to one API error response. Thrown anywhere; rendered by the error handler. */
export class ApiError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly headers: Record<string, string>

  constructor(code: ErrorCode, message: string = ERRORS[code].message, headers: Record<string, string> = {}) {
    super(message)
    this.name = 'ApiError'
    this.code = code
    this.statusCode = ERRORS[code].status
    this.headers = headers
  }

  toBody(): ErrorBody {
    return { code: this.code, message: this.message, status: this.statusCode }
  }
}

export function errorBody(code: ErrorCode, message: string = ERRORS[code].message): ErrorBody {
  return { code, message, status: ERRORS[code].status }
}
