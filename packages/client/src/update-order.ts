// `updateOrder`: the patch checked and written as a JSON Merge Patch, and the order's ETag read back.
import type { OrderV2 } from './api-types.js'
import { unexpected } from './errors.js'
import type { operations as operationsV2 } from './openapi-v2-types.js'
import { instant, int64Text } from './request-values.js'

/** The body as the v2 document describes it: a change there that the client does not follow fails to compile. */
type UpdateOrderRequest = NonNullable<operationsV2['updateOrder']['requestBody']>['content']['application/merge-patch+json']

/**
 * A change to an order (a JSON Merge Patch, RFC 7396): only the members given change. `petId`,
 * `quantity` and `shipDate` only while the order is pending; `metadata` in any state.
 */
export interface OrderPatch {
  /** The pet: a bigint or its decimal string (a JS number is exact only up to 2^53, so it is refused). */
  petId?: bigint | string
  /** 1–1000. */
  quantity?: UpdateOrderRequest['quantity']
  /** When it is to ship: a Date or an RFC 3339 date-time; null removes it. */
  shipDate?: Date | string | null
  /** Keys to set (a string) or remove (null), the order's other keys staying as they are; or null to remove every key. */
  metadata?: UpdateOrderRequest['metadata']
}

/** What `updateOrder` resolves with. */
export interface UpdatedOrder {
  /**
   * The order as it now stands (as it was, for a patch that changed nothing); undefined for a key
   * without `orders:read`, which is not shown the order (the server's 204).
   */
  order: OrderV2 | undefined
  /** Its ETag, such as `"4"`: give it as `ifMatch` to the next write, to change it only if nobody else has. */
  etag: string
}

const DECIMAL = /^-?[0-9]+$/
/** An ETag of this API: a version in quotes. */
const ETAG = /^"[1-9][0-9]*"$/

/**
 * The request body. Members the client does not know are sent as given, so that the server refuses
 * them by name (400 `invalid_body`) rather than the call silently changing nothing; undefined
 * members are left out, as JSON has no undefined.
 */
export function patchBody(patch: OrderPatch): UpdateOrderRequest {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) throw new TypeError('updateOrder: the patch must be an object')
  const body: Record<string, unknown> = {}
  for (const [member, value] of Object.entries(patch)) {
    if (value === undefined) continue
    if (member === 'petId') {
      const petId = int64Text(value, 'updateOrder: petId')
      if (!DECIMAL.test(petId)) throw new TypeError('updateOrder: petId must be a bigint or a decimal string')
      body.petId = BigInt(petId)
    } else if (member === 'shipDate') {
      body.shipDate = value === null ? null : instant(value as Date | string)
    } else {
      Object.defineProperty(body, member, { value, enumerable: true, writable: true, configurable: true })
    }
  }
  return body as UpdateOrderRequest
}

/** The ETag of a write's response (200 or 204), which the server always sends. */
export function etagOf(response: Response): string {
  const etag = response.headers.get('etag')
  if (etag === null || !ETAG.test(etag)) throw unexpected(response, `expected an ETag such as "3", got ${etag === null ? 'none' : JSON.stringify(etag)}`)
  return etag
}
