import { randomUUID } from 'node:crypto'
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { ApiError, errorBody, ERRORS, type ErrorBody, type ErrorCode } from '../errors.js'
import { StoreUnavailableError } from '../store/store.js'
import { requestIdOf } from './request-id.js'
import { shorten } from './shorten.js'
import { BODY_MUST_BE_JSON, MERGE_PATCH_MEDIA_TYPE } from './strict-body.js'
import { queryEncodingError } from './strict-query.js'

// Errors Fastify and Node raise by themselves, mapped to our codes. Anything else ≥ 500 is internal.
const FRAMEWORK_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'bad_request',
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_body',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_body',
  FST_ERR_BAD_URL: 'bad_request',
  FST_ERR_INVALID_URL: 'bad_request',
}

const BY_STATUS: Partial<Record<number, ErrorCode>> = {
  400: 'bad_request',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  413: 'payload_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  431: 'headers_too_large',
  503: 'service_unavailable',
}

/** The Error body for any error thrown while handling a request. Never exposes internals of a 5xx. */
function toErrorResponse(error: FastifyError | Error): { body: ErrorBody; headers: Record<string, string> } {
  if (error instanceof ApiError) return { body: error.toBody(), headers: error.headers }
  if (error instanceof StoreUnavailableError) {
    return { body: errorBody('service_unavailable'), headers: { 'retry-after': '1' } }
  }
  const fastifyError = error as FastifyError
  const mapped = fastifyError.code === undefined ? undefined : FRAMEWORK_CODES[fastifyError.code]
  // A body of a type no parser takes (a form, XML…): say which one is, as for text/plain.
  if (fastifyError.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return { body: errorBody('unsupported_media_type', BODY_MUST_BE_JSON), headers: {} }
  if (mapped !== undefined) return { body: errorBody(mapped), headers: {} }
  if (error instanceof SyntaxError && fastifyError.statusCode === 400) return { body: errorBody('invalid_body'), headers: {} }
  const status = fastifyError.statusCode ?? 500
  const code = status < 500 ? (BY_STATUS[status] ?? 'bad_request') : 'internal_error'
  return { body: errorBody(code), headers: {} }
}

/**
 * Why a request was refused, for its log line. Our own messages cut what they repeat of the
 * request; Fastify's and Node's may hold a header or the URL whole (`Unsupported Media Type: …`).
 */
function refusalReason(error: Error): string {
  return error instanceof ApiError ? error.message : shorten(error.message)
}

/** The patch formats every PATCH takes (RFC 5789 §3.1), said on its 415 and its OPTIONS. */
const ACCEPT_PATCH = `${MERGE_PATCH_MEDIA_TYPE}, application/json`
const PATCH_MUST_BE_JSON = `A PATCH body must be a JSON Merge Patch, sent with Content-Type: ${MERGE_PATCH_MEDIA_TYPE} (or application/json).`

/** Answers an error with its Error body, and logs it: the app's error handler, and its handler of framework errors. */
export function sendError(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  let { body, headers } = toErrorResponse(error)
  // A PATCH of a type no parser takes says which ones it does (RFC 5789 §2.2).
  if (body.status === 415 && request.method === 'PATCH') {
    headers = { ...headers, 'accept-patch': ACCEPT_PATCH }
    if (body.message === BODY_MUST_BE_JSON) body = { ...body, message: PATCH_MUST_BE_JSON }
  }
  // Headers a handler set for the representation it meant to send do not describe the Error.
  for (const name of ['content-encoding', 'etag', 'vary', 'content-length']) reply.removeHeader(name)
  reply.header('cache-control', 'no-store')
  // The database's unavailability is said once a minute at most, not with a stack per request.
  if (error instanceof StoreUnavailableError) request.server.databaseOutage.failed(error)
  else if (body.status >= 500) request.log.error({ err: error }, 'request failed')
  else request.log.info({ code: body.code, reason: refusalReason(error) }, 'request refused')
  return reply.code(body.status).headers(headers).send(body)
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(sendError)

  app.setNotFoundHandler((_request, reply) => {
    return reply.code(404).send(errorBody('not_found'))
  })

  // The router lets a path parameter match an empty segment (`/v1/store/orders/` matches
  // `/v1/store/orders/:orderId`, and so did its 405 handler). No resource has an empty name: such
  // a path is unknown, 404, whatever the method, before anything else is checked.
  app.addHook('onRoute', (route) => {
    // A route that reads its query (every v2 operation declares one) refuses one it cannot decode,
    // last before its parameters are checked (after the key, its scopes and its body); the others
    // (v1's, the ops endpoints) ignore the query, as they always have.
    if (route.schema?.querystring !== undefined) route.preValidation = [...[route.preValidation ?? []].flat(), malformedQuery]
    if (!route.url.includes(':')) return
    route.onRequest = [emptyParameterNotFound, ...[route.onRequest ?? []].flat()]
  })
}

function malformedQuery(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  done(queryEncodingError(request.url))
}

function emptyParameterNotFound(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const params = request.params as Record<string, string>
  for (const name in params) if (params[name] === '') return done(new ApiError('not_found'))
  done()
}

/**
 * Answers 405 with `Allow` for every other method on a path whose methods are `allowed`, and OPTIONS
 * with 204 and `Allow` (and `Accept-Patch` where PATCH is allowed). HEAD is allowed wherever GET is.
 */
export function registerMethodNotAllowed(app: FastifyInstance, url: string, allowed: string[]): void {
  const methods = new Set([...allowed, ...(allowed.includes('GET') ? ['HEAD'] : []), 'OPTIONS'])
  const allow = [...methods].join(', ')
  const others = app.supportedMethods.filter((method) => !methods.has(method))
  const refuse = async (_request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> =>
    reply.code(405).header('allow', allow).send(errorBody('method_not_allowed'))
  // Answered in the request hook, before a body is read: a wrong method is 405 whatever its body or
  // media type (a type this path has no parser for would otherwise be 415). The handler is not reached.
  // OPTIONS reads its body as any request does: one too large is 413, one of no JSON type 415.
  app.route({ method: others, url, schema: { hide: true }, onRequest: refuse, handler: refuse })
  const options = { allow, ...(methods.has('PATCH') ? { 'accept-patch': ACCEPT_PATCH } : {}) }
  app.options(url, { schema: { hide: true } }, async (_request, reply) => reply.code(204).headers(options).send())
}

// The malformed requests answered with a code of their own; any other is `bad_request`.
const CLIENT_ERROR_CODES: Partial<Record<string, ErrorCode>> = { HPE_HEADER_OVERFLOW: 'headers_too_large', ERR_HTTP_REQUEST_TIMEOUT: 'request_timeout' }

/** What Node keeps on a server socket: the response being written, and the request being read. */
interface HttpSocket extends Socket {
  _httpMessage?: ServerResponse | null
  parser?: { incoming?: IncomingMessage | null } | null
}

/**
 * Malformed HTTP never reaches Fastify's router: Node rejects it on the socket. Answer it with an
 * Error body too, then close the connection (its framing can no longer be trusted).
 *
 * One response per request, as Node's own handler does (`socketOnError` in Node's
 * lib/_http_server.js): no answer is written once a response to the request has started. That
 * includes a response that has already finished while its request's body was still being read (a
 * 401 or 415 answered on the headers, then a malformed chunk): Node has detached that response
 * from the socket, but the request is still the parser's, incomplete.
 */
export function clientErrorResponse(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  const { _httpMessage: response = null, parser } = socket as HttpSocket
  const reading = parser?.incoming?.complete === false ? parser.incoming : undefined
  if (error.code === 'ECONNRESET' || !socket.writable || response?.headersSent === true) {
    socket.destroy() // a response cut short is better than a second one in its bytes
    return
  }
  if (response === null && reading !== undefined) {
    socket.end() // the request being read was answered already, completely: close once that is flushed
    return
  }
  const code = CLIENT_ERROR_CODES[error.code ?? ''] ?? 'bad_request'
  const status = ERRORS[code].status
  const body = JSON.stringify(errorBody(code))
  // The request's own id when its headers were read (the error is in its body), else a new one.
  const id = reading !== undefined ? requestIdOf(reading) : randomUUID()
  this.log.info({ reqId: id, code, reason: error.code ?? shorten(error.message) }, 'request refused')
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${id}\r\nX-Content-Type-Options: nosniff\r\n` +
      `Cache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
  )
}
