// `placeOrder`: the body checked, and every attempt sent with one Idempotency-Key.
import { v7 as uuidv7 } from 'uuid'
import type { OrderV2 } from './api-types.js'
import { decodeOne } from './decode.js'
import type { operations as operationsV2 } from './openapi-v2-types.js'
import { instant, int64Text } from './request-values.js'
import { isRetriedPlaceFailure, pause, ResponseCutOffError, retryDelay } from './retries.js'
import { parseJson, type Call, type RequestOptions } from './transport.js'

/** The order to place: `petId` and `quantity` (1–1000) required, `shipDate` and `metadata` optional. */
export interface PlaceOrderBody {
  /** The pet: a bigint or its decimal string (a JS number is exact only up to 2^53, so it is refused). */
  petId: bigint | string
  /** 1–1000. */
  quantity: number
  /** When it is to ship: a Date or an RFC 3339 date-time. */
  shipDate?: Date | string
  /** The store's own keys and values (at most 50 keys of 1–40 `A–Z a–z 0–9 _ - . :`, values of at most 500 characters). */
  metadata?: PlaceOrderRequest['metadata']
}

export interface PlaceOptions extends RequestOptions {
  /**
   * The request's Idempotency-Key, 1–255 visible ASCII characters, scoped to the API key. Give one
   * kept with the order's origin (a cart, a message) to retry beyond this call, e.g. after a crash:
   * within the server's `IDEMPOTENCY_KEY_TTL_HOURS` (default 24), the same key and body never place
   * a second order. Default: a new UUIDv7 for this call (a time-ordered UUID: see `placeOrder`).
   */
  idempotencyKey?: string
  /** How many requests the call sends at most, 1–10 (default 5): the first and its retries. */
  maxAttempts?: number
  /** Called before each retry with the failure, the key and the delay; it may throw to give up. */
  onRetry?: (retry: PlaceRetry) => void
}

/** A failed request of `placeOrder` that will be retried with the same key. */
export interface PlaceRetry {
  /** A PetstoreApiError (5xx, 409 `idempotency_key_in_use`), or the error of a request that got no full response. */
  error: unknown
  /** 1 for the first retry. */
  attempt: number
  /** How long until the retry: `Retry-After` when the response had one, else the backoff. */
  delayMs: number
  /** The Idempotency-Key every attempt of this call sends. */
  idempotencyKey: string
}

/** The body as the v2 document describes it: a change there that the client does not follow fails to compile. */
type PlaceOrderRequest = NonNullable<operationsV2['placeOrder']['requestBody']>['content']['application/json']

const DEFAULT_PLACE_ATTEMPTS = 5
const MAX_PLACE_ATTEMPTS = 10
/** Visible ASCII, as the Idempotency-Key draft (and the server) require. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/
const DECIMAL = /^-?[0-9]+$/

/** `placeOrder`: one key for every attempt, so that however many reach the server, one order is placed. */
export async function placeWithRetries(call: Call, order: PlaceOrderBody, options: PlaceOptions): Promise<OrderV2> {
  const { signal, onRetry, maxAttempts = DEFAULT_PLACE_ATTEMPTS } = options
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > MAX_PLACE_ATTEMPTS) {
    throw new TypeError(`placeOrder: maxAttempts must be an integer, 1–${MAX_PLACE_ATTEMPTS}`)
  }
  // Time-ordered (RFC 9562): the server's index of keys grows at its end, where a random UUID would
  // make every place write a page of it somewhere in the middle.
  const idempotencyKey = options.idempotencyKey ?? uuidv7()
  if (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey)) {
    throw new TypeError('placeOrder: idempotencyKey must be 1–255 visible ASCII characters')
  }
  const body = placeBody(order)
  const headers = { 'idempotency-key': idempotencyKey }
  for (let attempt = 1; ; attempt++) {
    try {
      const response = await call('POST', 'store/orders', signal, body, headers)
      let text: string
      try {
        text = await response.text()
      } catch (error) {
        throw new ResponseCutOffError(error) // the order may well be placed: the retry's replay says so
      }
      return decodeOne(parseJson(text, response), response)
    } catch (error) {
      // A body cut off is thrown as fetch threw it, as documented for a request with no response.
      const thrown = error instanceof ResponseCutOffError ? error.cause : error
      if (signal?.aborted === true || attempt >= maxAttempts || !isRetriedPlaceFailure(error)) throw thrown
      const delayMs = retryDelay(error, attempt)
      onRetry?.({ error: thrown, attempt, delayMs, idempotencyKey })
      if (!(await pause(delayMs, signal))) throw signal?.reason ?? thrown
    }
  }
}

/** The request body: `petId` an exact JSON integer, `shipDate` as given (a Date in RFC 3339), `metadata` as given. */
function placeBody(order: PlaceOrderBody): PlaceOrderRequest {
  if (typeof order !== 'object' || order === null) throw new TypeError('placeOrder: the order must be an object')
  const petId = int64Text(order.petId, 'placeOrder: petId')
  if (!DECIMAL.test(petId)) throw new TypeError('placeOrder: petId must be a bigint or a decimal string')
  const body: PlaceOrderRequest = { petId: BigInt(petId), quantity: order.quantity }
  if (order.shipDate !== undefined) body.shipDate = instant(order.shipDate)
  if (order.metadata !== undefined) body.metadata = order.metadata
  return body
}
