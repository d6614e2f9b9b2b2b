// The checks of every response body: each value the client returns is decoded field by field from
// the lossless JSON (int64 as bigint, int32 in range, a status among those known), and a body that
// is not what the API sends is an `unexpected_response` naming what was wrong.
import { isInteger, isLosslessNumber } from 'lossless-json'
import type {
  CancellationReason,
  Order,
  OrderEvent,
  OrderEventPage,
  OrderEventType,
  OrderPage,
  OrderStatus,
  OrderV2,
  WebhookAttempt,
  WebhookEndpoint,
  WebhookEndpointCreated,
  WebhookPingResult,
} from './api-types.js'
import { unexpected } from './errors.js'

const EVENT_TYPES: readonly string[] = ['order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled'] satisfies OrderEventType[]

export function decodeOrders(body: unknown, response: Response): Order[] {
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

const STATUSES: readonly string[] = ['pending', 'shipped', 'cancelled'] satisfies OrderStatus[]

/** A v2 Order from its lossless JSON: the v1 fields decoded as v1 does, the status fields, `version` and `metadata`. */
function decodeOrderV2(value: unknown): OrderV2 {
  const v1 = decodeOrder(value)
  const record = value as Record<string, unknown>
  if (v1.id === undefined) throw new Error('id is missing')
  if (typeof record.complete !== 'boolean') throw new Error('complete is not a boolean')
  if (typeof record.status !== 'string' || !STATUSES.includes(record.status)) throw new Error('status is not a known status')
  const order: OrderV2 = { ...v1, id: v1.id, complete: record.complete, status: record.status as OrderStatus, version: int32(record.version, 'version') }
  if (order.version < 1) throw new Error('version is not 1 or more')
  if (record.shippedAt !== undefined) {
    if (typeof record.shippedAt !== 'string') throw new Error('shippedAt is not a string')
    order.shippedAt = record.shippedAt
  }
  if (record.completedAt !== undefined) {
    if (typeof record.completedAt !== 'string') throw new Error('completedAt is not a string')
    order.completedAt = record.completedAt
  }
  if (record.cancelledAt !== undefined) {
    if (typeof record.cancelledAt !== 'string') throw new Error('cancelledAt is not a string')
    order.cancelledAt = record.cancelledAt
  }
  if (record.cancellationReason !== undefined) {
    if (typeof record.cancellationReason !== 'string') throw new Error('cancellationReason is not a string')
    order.cancellationReason = record.cancellationReason as CancellationReason
  }
  if (record.metadata !== undefined) order.metadata = decodeMetadata(record.metadata)
  return order
}

/**
 * An order's metadata: an object of string values, as a new object with an own property per key
 * (`__proto__` and `constructor` included, as the server may hold them), in the response's order.
 */
function decodeMetadata(value: unknown): Record<string, string> {
  if (!isRecord(value)) throw new Error('metadata is not an object')
  const entries = Object.entries(value)
  for (const [key, item] of entries) {
    if (typeof item !== 'string') throw new Error(`metadata ${JSON.stringify(key)} is not a string`)
  }
  return Object.fromEntries(entries) as Record<string, string>
}

export function decodePage(body: unknown, response: Response): OrderPage {
  if (!isRecord(body) || !Array.isArray(body.data)) throw unexpected(response, 'expected a page of orders')
  const data = body.data.map((item, index) => {
    try {
      return decodeOrderV2(item)
    } catch (error) {
      throw unexpected(response, `order ${index}: ${(error as Error).message}`)
    }
  })
  if (body.nextCursor === undefined) return { data }
  if (typeof body.nextCursor !== 'string') throw unexpected(response, 'nextCursor is not a string')
  return { data, nextCursor: body.nextCursor }
}

export function decodeOne(body: unknown, response: Response): OrderV2 {
  try {
    return decodeOrderV2(body)
  } catch (error) {
    throw unexpected(response, `order: ${(error as Error).message}`)
  }
}

export function decodeEventsPage(body: unknown, response: Response): OrderEventPage {
  if (!isRecord(body) || !Array.isArray(body.data)) throw unexpected(response, 'expected a page of order events')
  if (typeof body.nextCursor !== 'string' || body.nextCursor === '') throw unexpected(response, 'nextCursor is missing')
  const data = body.data.map((item, index) => {
    try {
      return decodeOrderEvent(item)
    } catch (error) {
      throw unexpected(response, `event ${index}: ${(error as Error).message}`)
    }
  })
  return { data, nextCursor: body.nextCursor }
}

function decodeOrderEvent(value: unknown): OrderEvent {
  if (!isRecord(value)) throw new Error('not an object')
  if (typeof value.id !== 'string' || value.id === '') throw new Error('id is not a string')
  if (typeof value.type !== 'string' || !EVENT_TYPES.includes(value.type)) throw new Error('type is not a known event type')
  if (typeof value.occurredAt !== 'string') throw new Error('occurredAt is not a string')
  let order: OrderV2
  try {
    order = decodeOrderV2(value.order)
  } catch (error) {
    throw new Error(`order: ${(error as Error).message}`)
  }
  const event: OrderEvent = { id: value.id, type: value.type as OrderEventType, occurredAt: value.occurredAt, order }
  if (value.previous !== undefined) event.previous = decodePrevious(value.previous)
  return event
}

/** An update's `previous`: each field it changed, as it was (null: the order did not have it). */
function decodePrevious(value: unknown): NonNullable<OrderEvent['previous']> {
  if (!isRecord(value)) throw new Error('previous is not an object')
  const previous: NonNullable<OrderEvent['previous']> = {}
  if (value.petId !== undefined) previous.petId = value.petId === null ? null : int64(value.petId, 'previous.petId')
  if (value.quantity !== undefined) previous.quantity = value.quantity === null ? null : int32(value.quantity, 'previous.quantity')
  if (value.shipDate !== undefined) {
    if (value.shipDate !== null && typeof value.shipDate !== 'string') throw new Error('previous.shipDate is not a string')
    previous.shipDate = value.shipDate
  }
  if (value.metadata !== undefined) previous.metadata = value.metadata === null ? null : decodeMetadata(value.metadata)
  return previous
}

/** A value decoded by `decode`, or an `unexpected_response` naming what was wrong. */
export function decodeWith<T>(decode: (value: unknown) => T, body: unknown, response: Response, what: string): T {
  try {
    return decode(body)
  } catch (error) {
    throw unexpected(response, `${what}: ${(error as Error).message}`)
  }
}

/** `{"data": [...]}`, each item decoded by `decode`. */
export function decodeList<T>(decode: (value: unknown) => T, body: unknown, response: Response, what: string): T[] {
  if (!isRecord(body) || !Array.isArray(body.data)) throw unexpected(response, `expected {"data": [${what}s]}`)
  return body.data.map((item, index) => decodeWith(decode, item, response, `${what} ${index}`))
}

function text(record: Record<string, unknown>, field: string): string {
  const value = record[field]
  if (typeof value !== 'string') throw new Error(`${field} is not a string`)
  return value
}

function optionalText(record: Record<string, unknown>, field: string): string | undefined {
  return record[field] === undefined ? undefined : text(record, field)
}

const ENDPOINT_STATUSES: readonly string[] = ['enabled', 'disabled'] satisfies WebhookEndpoint['status'][]

export function decodeWebhookEndpoint(value: unknown): WebhookEndpoint {
  if (!isRecord(value)) throw new Error('not an object')
  const eventTypes = value.eventTypes
  if (!Array.isArray(eventTypes) || !eventTypes.every((type) => typeof type === 'string' && EVENT_TYPES.includes(type))) {
    throw new Error('eventTypes is not a list of event types')
  }
  const status = text(value, 'status')
  if (!ENDPOINT_STATUSES.includes(status)) throw new Error('status is not a known status')
  const endpoint: WebhookEndpoint = {
    id: int64(value.id, 'id'),
    url: text(value, 'url'),
    eventTypes: eventTypes as OrderEventType[],
    status: status as WebhookEndpoint['status'],
    position: text(value, 'position'),
    createdAt: text(value, 'createdAt'),
  }
  const description = optionalText(value, 'description')
  if (description !== undefined) endpoint.description = description
  const disabledReason = optionalText(value, 'disabledReason')
  if (disabledReason !== undefined) endpoint.disabledReason = disabledReason as WebhookEndpoint['disabledReason']
  const failingSince = optionalText(value, 'failingSince')
  if (failingSince !== undefined) endpoint.failingSince = failingSince
  const nextAttemptAt = optionalText(value, 'nextAttemptAt')
  if (nextAttemptAt !== undefined) endpoint.nextAttemptAt = nextAttemptAt
  return endpoint
}

export function decodeCreatedEndpoint(value: unknown): WebhookEndpointCreated {
  const endpoint = decodeWebhookEndpoint(value)
  return { ...endpoint, secret: text(value as Record<string, unknown>, 'secret') }
}

export function decodeWebhookAttempt(value: unknown): WebhookAttempt {
  if (!isRecord(value)) throw new Error('not an object')
  const attempt: WebhookAttempt = {
    eventId: text(value, 'eventId'),
    attemptedAt: text(value, 'attemptedAt'),
    durationMs: int32(value.durationMs, 'durationMs'),
  }
  if (value.status !== undefined) attempt.status = int32(value.status, 'status')
  const error = optionalText(value, 'error')
  if (error !== undefined) attempt.error = error
  return attempt
}

export function decodePingResult(value: unknown): WebhookPingResult {
  if (!isRecord(value)) throw new Error('not an object')
  const result: WebhookPingResult = { durationMs: int32(value.durationMs, 'durationMs') }
  if (value.status !== undefined) result.status = int32(value.status, 'status')
  const error = optionalText(value, 'error')
  if (error !== undefined) result.error = error
  return result
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

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !isLosslessNumber(value)
}
