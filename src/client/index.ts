/**
 * The TypeScript client of the Petstore Orders API: `import { createClient } from 'petstore-orders/client'`.
 *
 * Its types come from the OpenAPI document the service serves (./openapi-types.ts, generated). int64
 * ids are `bigint`, exact to the last digit: responses are parsed with lossless-json, never through a
 * JS `number` (exact only up to 2^53). It needs nothing but `fetch` (Node.js 20+, or any runtime
 * that has it).
 */
import { isInteger, isLosslessNumber, parse } from 'lossless-json'
import type { components, operations } from './openapi-types.js'

/** An order, as listOrders returns it. A field whose value is not known is absent. */
export type Order = components['schemas']['Order']
/** The body of every error response. */
export type ErrorBody = components['schemas']['Error']
/** The codes of the API's errors (README "Error codes"). */
export type ErrorCode = ErrorBody['code']

export interface ClientOptions {
  /**
   * A server of the API: its URL ends in `/v1`, as the `servers` of the document do, e.g.
   * `https://api.petstore.example/v1` or `http://127.0.0.1:8080/v1`.
   */
  baseUrl: string | URL
  /** An API key (`pso_…`), sent as `Authorization: Bearer <apiKey>`. */
  apiKey: string
  /** The fetch to use; the global one by default. */
  fetch?: typeof globalThis.fetch
}

export interface RequestOptions {
  signal?: AbortSignal
}

export interface PetstoreClient {
  /** Every order that is not cancelled, in ascending id order (GET /store/orders). */
  listOrders(options?: RequestOptions): Promise<Order[]>
  /**
   * Cancels a pending order (DELETE /store/orders/{orderId}). Resolves once the cancellation is
   * durable. A shipped order rejects with 409 `order_already_shipped`; an unknown or already
   * cancelled one with 404 `order_not_found`. The id is a bigint or its decimal string.
   */
  cancelOrder(id: bigint | string, options?: RequestOptions): Promise<void>
}

/**
 * A call that failed: the server answered with an error status (then `code` and `message` are those
 * of its Error body), or with a response the client cannot read (`code` is `unexpected_response`).
 * A request that got no response at all (network down, aborted) rejects with fetch's own error.
 */
export class PetstoreApiError extends Error {
  /** The HTTP status of the response. */
  readonly status: number
  /** The Error body's code; `unexpected_response` when the response was not what the API sends. */
  readonly code: ErrorCode | 'unexpected_response' | (string & Record<never, never>)
  /** The `X-Request-Id` of the response: quote it when reporting a problem. */
  readonly requestId: string | undefined
  /** Seconds to wait before retrying, from `Retry-After` (429, 503). */
  readonly retryAfter: number | undefined

  constructor(status: number, code: string, message: string, headers?: Headers) {
    super(message)
    this.name = 'PetstoreApiError'
    this.status = status
    this.code = code
    this.requestId = headers?.get('x-request-id') ?? undefined
    const retryAfter = headers?.get('retry-after') ?? ''
    this.retryAfter = /^[0-9]+$/.test(retryAfter) ? Number(retryAfter) : undefined
  }
}

type ListOrdersResponse = operations['listOrders']['responses'][200]['content']['application/json']
type CancelOrderId = operations['cancelOrder']['parameters']['path']['orderId']

export function createClient(options: ClientOptions): PetstoreClient {
  const base = serverUrl(options.baseUrl)
  if (typeof options.apiKey !== 'string' || options.apiKey === '') throw new TypeError('apiKey: an API key is required')
  const fetchImpl = options.fetch ?? globalThis.fetch
  const headers = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json' }

  async function call(method: string, path: string, signal: AbortSignal | undefined): Promise<Response> {
    const response = await fetchImpl(new URL(path, base), { method, headers, signal, redirect: 'error' })
    if (!response.ok) throw await errorOf(response)
    return response
  }

  return {
    async listOrders({ signal } = {}) {
      const response = await call('GET', 'store/orders', signal)
      const orders: ListOrdersResponse = decodeOrders(await readJson(response), response)
      return orders
    },

    async cancelOrder(id, { signal } = {}) {
      const orderId: CancelOrderId | string = id
      if (typeof orderId !== 'bigint' && typeof orderId !== 'string') {
        // A JS number is exact only up to 2^53: refusing it is the only way not to cancel the wrong order.
        throw new TypeError('cancelOrder: the id must be a bigint or a decimal string')
      }
      const response = await call('DELETE', `store/orders/${encodeURIComponent(orderId.toString())}`, signal)
      await response.body?.cancel()
    },
  }
}

/** The server URL as a base for relative paths: it must end in /v1 (a trailing slash is added). */
function serverUrl(baseUrl: string | URL): URL {
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    throw new TypeError(`baseUrl: not a URL: ${String(baseUrl)}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('baseUrl: must be an http(s) URL')
  if (!/\/v1\/?$/.test(url.pathname)) {
    throw new TypeError(`baseUrl: must be a server of the API, ending in /v1 (got ${url.href})`)
  }
  url.pathname = url.pathname.replace(/\/?$/, '/')
  url.search = ''
  url.hash = ''
  return url
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text()
  if (!/^application\/json\b/i.test(response.headers.get('content-type') ?? '')) {
    throw unexpected(response, 'the response is not JSON')
  }
  try {
    return parse(text) // numbers stay LosslessNumber: exact, whatever their size
  } catch {
    throw unexpected(response, 'the response is not valid JSON')
  }
}

async function errorOf(response: Response): Promise<PetstoreApiError> {
  let body: unknown
  try {
    body = await readJson(response)
  } catch {
    body = undefined
  }
  if (isRecord(body) && typeof body.code === 'string' && typeof body.message === 'string') {
    return new PetstoreApiError(response.status, body.code, body.message, response.headers)
  }
  return unexpected(response, `HTTP ${response.status} ${response.statusText}`.trim())
}

function unexpected(response: Response, message: string): PetstoreApiError {
  return new PetstoreApiError(response.status, 'unexpected_response', message, response.headers)
}

function decodeOrders(body: unknown, response: Response): Order[] {
  if (!Array.isArray(body)) throw unexpected(response, 'expected a JSON array of orders')
  return body.map((item, index) => {
    try {
      return decodeOrder(item)
    } catch (error) {
      throw unexpected(response, `order ${index}: ${(error as Error).message}`)
    }
  })
}

/** An Order from its lossless JSON: int64 as bigint, the rest as JSON has it. Unknown fields are ignored. */
function decodeOrder(value: unknown): Order {
  if (!isRecord(value)) throw new Error('not an object')
  const order: Order = {}
  if (value.id !== undefined) order.id = int64(value.id, 'id')
  if (value.petId !== undefined) order.petId = int64(value.petId, 'petId')
  if (value.quantity !== undefined) order.quantity = int32(value.quantity, 'quantity')
  if (value.shipDate !== undefined) {
    if (typeof value.shipDate !== 'string') throw new Error('shipDate is not a string')
    order.shipDate = value.shipDate
  }
  if (value.complete !== undefined) {
    if (typeof value.complete !== 'boolean') throw new Error('complete is not a boolean')
    order.complete = value.complete
  }
  return order
}

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

function int64(value: unknown, field: string): bigint {
  if (!isLosslessNumber(value) || !isInteger(value.value)) throw new Error(`${field} is not an integer`)
  const result = BigInt(value.value)
  if (result < INT64_MIN || result > INT64_MAX) throw new Error(`${field} is out of the int64 range`)
  return result
}

function int32(value: unknown, field: string): number {
  if (!isLosslessNumber(value) || !isInteger(value.value)) throw new Error(`${field} is not an integer`)
  const result = Number(value.value)
  if (!Number.isSafeInteger(result) || result < -(2 ** 31) || result >= 2 ** 31) {
    throw new Error(`${field} is out of the int32 range`)
  }
  return result
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !isLosslessNumber(value)
}
