import { parseDateTime } from './date-time.js'
import { INT64_MAX, INT64_MIN } from './int64.js'
import type { OrderMetadata } from './order-metadata.js'

/** Stored order status. v1 does not expose it; listOrders returns every order that is not cancelled. */
export const ORDER_STATUSES = ['pending', 'shipped', 'cancelled'] as const
export type OrderStatus = (typeof ORDER_STATUSES)[number]

/** An order as the operator imports and the store keeps it: the API's Order plus its status. */
export interface OrderRecord {
  id: bigint
  petId: bigint | null
  quantity: number | null
  /** RFC 3339 in UTC, as `Date#toISOString()` writes it. */
  shipDate: string | null
  complete: boolean
  status: OrderStatus
  /** A cancelled order's cancellation time (RFC 3339 UTC, `toISOString()` form); absent: the import's time. */
  cancelledAt?: string
  /** A cancelled order's reason; absent: none. */
  cancellationReason?: CancellationReason
  /** The order's metadata (order-metadata.ts); absent or null: none. */
  metadata?: OrderMetadata | null
}

/** Why an order was cancelled: the closed set both stores CHECK and v2 shows. */
export const CANCELLATION_REASONS = ['customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other'] as const
export type CancellationReason = (typeof CANCELLATION_REASONS)[number]

/** An order as v2 shows it: the stored order, and on a cancelled one when and why (null: not known). */
export interface OrderV2Record extends Omit<OrderRecord, 'cancelledAt' | 'cancellationReason' | 'metadata'> {
  cancelledAt: string | null
  cancellationReason: CancellationReason | null
  /** When it was shipped through the API or the CLI (RFC 3339 UTC, milliseconds); null: not known (an import). */
  shippedAt: string | null
  /** When it was completed through the API or the CLI; null: not known or not complete. */
  completedAt: string | null
  /** The store's own keys and values (order-metadata.ts); null: none. */
  metadata: OrderMetadata | null
  /** 1 when placed or first imported, one more with every change of any kind: what an ETag names. */
  version: number
}

/**
 * What one conditional write to an order found. `Changed`: this request changed the order.
 * `Already`: an earlier one did, and a retry is safe. Either way `order` is the order as it now
 * stands. Else why it was not written: `Refused`, or `not_found`.
 */
type OrderWriteResult<Changed extends string, Already extends string, Refused extends string> =
  | { outcome: Changed; order: OrderV2Record }
  | { outcome: Already; order: OrderV2Record }
  | PreconditionFailed
  | { [Outcome in Refused | 'not_found']: { outcome: Outcome } }[Refused | 'not_found']

/** The write named a version (If-Match) that is not the order's: nothing was written; `version` is the current one. */
export interface PreconditionFailed {
  outcome: 'precondition_failed'
  version: number
}

/**
 * The version a write requires the order to be at (If-Match), or undefined for any. Checked before
 * anything else about the order but its existence: a write with a stale version changes nothing.
 */
export type ExpectedVersion = number | undefined

/** What `expected` makes of a write to `order`: refused with the current version, or undefined (go on). */
export function preconditionFailed(order: OrderV2Record, expected: ExpectedVersion): PreconditionFailed | undefined {
  return expected === undefined || expected === order.version ? undefined : { outcome: 'precondition_failed', version: order.version }
}

/**
 * What one cancel found. `already_cancelled`: it was cancelled before (by another request, an
 * import, or an earlier cancel of the same batch), and keeps that first cancellation's time and reason.
 */
export type CancelResult = OrderWriteResult<'cancelled', 'already_cancelled', 'already_shipped'>
export type CancelOutcome = CancelResult['outcome']

/** What one ship found. `shipped`: pending → shipped, `shippedAt` set. */
export type ShipResult = OrderWriteResult<'shipped', 'already_shipped', 'cancelled'>
export type ShipOutcome = ShipResult['outcome']

/** What one complete found. `completed`: the shipped order is now `complete`, `completedAt` set. */
export type CompleteResult = OrderWriteResult<'completed', 'already_complete', 'not_shipped' | 'cancelled'>
export type CompleteOutcome = CompleteResult['outcome']

/** An order a client places (placeOrder): the server gives it its id, `pending`, not complete. */
export interface NewOrder {
  petId: bigint
  /** 1–1000. */
  quantity: number
  /** RFC 3339 in UTC, as `Date#toISOString()` writes it; null: none given. */
  shipDate: string | null
  /** The store's own keys and values, checked by the caller (order-metadata.ts); absent or null: none. */
  metadata?: OrderMetadata | null
}

/** The most units an order may have: PostgreSQL's `integer`, which both stores keep it in. */
export const MAX_QUANTITY = 2_147_483_647
// toISOString()'s form, years 0001–9999 (PostgreSQL has no year 0), each field in its range.
const STORED_INSTANT = /^(?!0000)\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z$/

/**
 * Why a store refuses to write this order, or undefined: a petId outside int64, a quantity not from
 * 1 to MAX_QUANTITY, a shipDate not as toISOString() writes it (years 0001–9999). Both stores check
 * a place with it before it joins a batch (a statement it failed would fail the whole batch), and
 * the import checks each record with it (absent values pass): so the API and an import accept the
 * same orders on either store. The API's schema refuses most of these first, with a 400.
 */
export function checkNewOrder(order: Pick<OrderRecord, 'petId' | 'quantity' | 'shipDate'>): string | undefined {
  const { petId, quantity, shipDate } = order
  if (petId !== null && (petId < INT64_MIN || petId > INT64_MAX)) return `petId must be an integer from ${INT64_MIN} to ${INT64_MAX}, got ${petId}`
  if (quantity !== null && !(Number.isInteger(quantity) && quantity >= 1 && quantity <= MAX_QUANTITY)) {
    return `quantity must be an integer from 1 to ${MAX_QUANTITY}, got ${quantity}`
  }
  if (shipDate !== null && !isStoredInstant(shipDate)) {
    return `shipDate must be an instant as toISOString() writes it, in years 0001 to 9999, got ${JSON.stringify(shipDate)}`
  }
  return undefined
}

function isStoredInstant(text: string): boolean {
  if (!STORED_INSTANT.test(text)) return false
  // Days 29 to 31 exist in some months only: those few are read as a date-time.
  return text.charCodeAt(8) < 0x32 /* 0, 1 */ || (text.charCodeAt(8) === 0x32 && text.charCodeAt(9) < 0x39) || parseDateTime(text) === text
}

/**
 * An Idempotency-Key of a place, scoped to the API key that sent it. `fingerprint` identifies the
 * request's body (the same body, however it is spelled, gives the same fingerprint).
 */
export interface IdempotencyClaim {
  apiKeyId: bigint
  /** 1–255 visible ASCII characters. */
  key: string
  /** SHA-256 of the canonical body, hex. */
  fingerprint: string
  /** The record is kept until then; after it, the key may be used again. */
  expiresAt: Date
}

export interface PlaceRequest {
  order: NewOrder
  idempotency?: IdempotencyClaim
}

/**
 * What one place found. `placed`: this request placed `order` (and stored its key, if it had one,
 * in the same transaction). `replayed`: the key was used before with the same body, within its
 * lifetime; nothing was placed, and the first response is given again (`orderId` and `body`, the
 * Order JSON that response carried). `key_reused`: the key was used before with another body.
 * `key_in_use`: a request with the key is being processed (here or on another instance).
 * `ids_exhausted`: the store holds the id 9223372036854775807, so no id above every id is left.
 */
export type PlaceResult =
  | { outcome: 'placed'; order: OrderV2Record }
  | { outcome: 'replayed'; orderId: bigint; status: number; body: string }
  | { outcome: 'key_reused' }
  | { outcome: 'key_in_use' }
  | { outcome: 'ids_exhausted' }

/** The state rule import and ship share: a status only moves forward, and cancelled is final. */
export function canMoveTo(from: OrderStatus, to: OrderStatus): boolean {
  return from === to || from === 'pending'
}
