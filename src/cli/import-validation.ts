/**
 * The validation of one record of `orders import` and `pets import`, as import-records.ts reads it:
 * a parsed JSON value whose numbers are {@link JsonNumber}s.
 */
import { parseDateTime } from '../domain/date-time.js'
import { INT64_MAX, parseInt64 } from '../domain/int64.js'
import { MAX_METADATA_KEYS, metadataKeyProblem, metadataValueProblem, toMetadata, type OrderMetadata } from '../domain/order-metadata.js'
import { CANCELLATION_REASONS, checkNewOrder, MAX_QUANTITY, ORDER_STATUSES, type OrderRecord } from '../domain/orders.js'
import type { Pet } from '../schemas/pet.js'

/** A record that breaks a rule; the reader adds its position. */
export class InvalidRecordError extends Error {
  constructor(reason: string) {
    super(reason)
    this.name = 'InvalidRecordError'
  }
}

/** A JSON number as written in the file: `text` is its source text, digit for digit. */
export class JsonNumber {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

const MAX_PET_NAME_LENGTH = 200
const MAX_PET_TAG_LENGTH = 200

const ORDER_FIELDS = ['id', 'petId', 'quantity', 'shipDate', 'complete', 'status', 'cancelledAt', 'cancellationReason', 'metadata'] as const
const PET_FIELDS = ['id', 'name', 'tag'] as const

/**
 * An order record: `{id, petId, quantity, shipDate, complete, status, cancelledAt, cancellationReason, metadata}`.
 * - `id`: required; `petId`: optional — both integers from 1 to 2^63−1, as JSON integers or decimal
 *   strings (int64 ids often travel as strings).
 * - `quantity`: optional, an integer from 1 to 2147483647.
 * - `shipDate`: optional, RFC 3339 with a timezone; stored in UTC (`toISOString()`).
 * - `complete`: optional boolean (false); true only when `status` is `shipped`.
 * - `status`: optional, `pending` (default), `shipped` or `cancelled`.
 * - `cancelledAt`: optional, RFC 3339 with a timezone, as `shipDate`; a cancelled order only.
 * - `cancellationReason`: optional, one of CANCELLATION_REASONS; a cancelled order only.
 * - `metadata`: optional, an object of string values by order-metadata.ts's rules, in any status;
 *   `{}` is none.
 * `null` is the same as absent. Any other field is refused. A record is the order's whole state:
 * the stores write every field, so a field left out (metadata too) clears what the order had.
 */
export function validateOrderRecord(value: unknown): OrderRecord {
  const record = objectWith(value, ORDER_FIELDS, 'an order')
  const id = positiveInt64(record.id, 'id', true)!
  const petId = positiveInt64(record.petId, 'petId', false)
  const quantity = optionalQuantity(record.quantity)
  const shipDate = optionalDateTime(record.shipDate, 'shipDate')
  const status = optionalOneOf(record.status, 'status', ORDER_STATUSES) ?? 'pending'
  const complete = optionalBoolean(record.complete, 'complete')
  if (complete && status !== 'shipped') {
    throw new InvalidRecordError(`complete is true but status is "${status}"; only a shipped order can be complete`)
  }
  const cancelledAt = optionalDateTime(record.cancelledAt, 'cancelledAt')
  const cancellationReason = optionalOneOf(record.cancellationReason, 'cancellationReason', CANCELLATION_REASONS)
  if (status !== 'cancelled') {
    const given = cancelledAt !== null ? 'cancelledAt' : cancellationReason !== null ? 'cancellationReason' : undefined
    if (given !== undefined) {
      throw new InvalidRecordError(`order ${id}: ${given} is given but status is "${status}"; only a cancelled order has one`)
    }
  }
  const metadata = optionalMetadata(record.metadata)
  const order: OrderRecord = { id, petId, quantity, shipDate, complete, status }
  // What a place would refuse (a quantity out of range): the same orders on both stores, either way.
  const refused = checkNewOrder(order)
  if (refused !== undefined) throw new InvalidRecordError(refused)
  if (cancelledAt !== null) order.cancelledAt = cancelledAt
  if (cancellationReason !== null) order.cancellationReason = cancellationReason
  if (metadata !== null) order.metadata = metadata
  return order
}

/** A pet record: `{id, name, tag?}`; `name` is 1 to 200 characters, not blank; `tag` 1 to 200 when given. */
export function validatePetRecord(value: unknown): Pet {
  const record = objectWith(value, PET_FIELDS, 'a pet')
  const id = positiveInt64(record.id, 'id', true)!
  const name = boundedString(record.name, 'name', MAX_PET_NAME_LENGTH, true)!
  const tag = boundedString(record.tag, 'tag', MAX_PET_TAG_LENGTH, false)
  return tag === undefined ? { id, name } : { id, name, tag }
}

function objectWith(value: unknown, fields: readonly string[], what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof JsonNumber) {
    throw new InvalidRecordError(`expected a JSON object, got ${describe(value)}`)
  }
  const record = value as Record<string, unknown>
  for (const key of Object.keys(record)) {
    if (!fields.includes(key)) {
      throw new InvalidRecordError(`unknown field ${JSON.stringify(key)} (${what} has ${fields.join(', ')})`)
    }
  }
  return record
}

function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null
}

function positiveInt64(value: unknown, field: string, required: true): bigint
function positiveInt64(value: unknown, field: string, required: false): bigint | null
function positiveInt64(value: unknown, field: string, required: boolean): bigint | null {
  if (isAbsent(value)) {
    if (required) throw new InvalidRecordError(`${field} is required`)
    return null
  }
  const id = value instanceof JsonNumber ? parseInt64(value.text) : typeof value === 'string' ? parseInt64(value) : undefined
  if (id === undefined || id < 1n) {
    throw new InvalidRecordError(`${field} must be an integer from 1 to ${INT64_MAX}, got ${describe(value)}`)
  }
  return id
}

function optionalQuantity(value: unknown): number | null {
  if (isAbsent(value)) return null
  // An integer's text; its range is checkNewOrder's.
  if (value instanceof JsonNumber && /^-?[0-9]{1,12}$/.test(value.text)) return Number(value.text)
  throw new InvalidRecordError(`quantity must be an integer from 1 to ${MAX_QUANTITY}, got ${describe(value)}`)
}

function optionalBoolean(value: unknown, field: string): boolean {
  if (isAbsent(value)) return false
  if (typeof value !== 'boolean') throw new InvalidRecordError(`${field} must be true or false, got ${describe(value)}`)
  return value
}

function optionalOneOf<T extends string>(value: unknown, field: string, values: readonly T[]): T | null {
  if (isAbsent(value)) return null
  if (typeof value !== 'string' || !(values as readonly string[]).includes(value)) {
    throw new InvalidRecordError(`${field} must be one of ${values.join(', ')}, got ${describe(value)}`)
  }
  return value as T
}

function boundedString(value: unknown, field: string, max: number, required: boolean): string | undefined {
  if (isAbsent(value)) {
    if (required) throw new InvalidRecordError(`${field} is required`)
    return undefined
  }
  if (typeof value !== 'string') throw new InvalidRecordError(`${field} must be a string, got ${describe(value)}`)
  const length = [...value].length // characters, not UTF-16 units
  if (value.trim() === '' || length > max) {
    throw new InvalidRecordError(`${field} must be 1 to ${max} characters and not blank, got ${describe(value)}`)
  }
  return value
}

/**
 * An order's metadata, as placeOrder takes it (order-metadata.ts): the message names the key. The
 * parsers make every key an own property (`__proto__` too, as JSON.parse does), and toMetadata
 * copies them the same way, so no key reaches a prototype.
 */
function optionalMetadata(value: unknown): OrderMetadata | null {
  if (isAbsent(value)) return null
  if (typeof value !== 'object' || Array.isArray(value) || value instanceof JsonNumber) {
    throw new InvalidRecordError(`metadata must be an object of string values, got ${describe(value)}`)
  }
  const entries = Object.entries(value)
  if (entries.length > MAX_METADATA_KEYS) {
    throw new InvalidRecordError(`metadata must have at most ${MAX_METADATA_KEYS} keys, got ${entries.length}`)
  }
  for (const [key, given] of entries) {
    const keyProblem = metadataKeyProblem(key)
    if (keyProblem !== undefined) throw new InvalidRecordError(keyProblem)
    const valueProblem = metadataValueProblem(key, given)
    if (valueProblem !== undefined) {
      throw new InvalidRecordError(typeof given === 'string' ? valueProblem : `${valueProblem}, got ${describe(given)}`)
    }
  }
  return toMetadata(entries as [string, string][])
}

function optionalDateTime(value: unknown, field: string): string | null {
  if (isAbsent(value)) return null
  const normalized = typeof value === 'string' ? parseDateTime(value) : undefined
  if (normalized === undefined) {
    throw new InvalidRecordError(
      `${field} must be an RFC 3339 date-time with a timezone, such as 2026-11-25T10:00:00Z, got ${describe(value)}`,
    )
  }
  return normalized
}

/** A value as an error message shows it: short, and on one line. */
function describe(value: unknown): string {
  if (value === null) return 'null'
  if (value instanceof JsonNumber) return shorten(value.text)
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return 'an object'
  if (typeof value === 'string') return JSON.stringify(shorten(value))
  return String(value)
}

function shorten(text: string): string {
  const characters = [...text]
  return characters.length > 40 ? `${characters.slice(0, 40).join('')}…` : text
}
