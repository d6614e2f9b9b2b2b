/**
 * Reading and validating the files of `orders import` and `pets import`.
 *
 * A file is a JSON array of records or NDJSON (one record a line), told apart by its first
 * non-whitespace character (`[` means an array). Both are streamed: a record is parsed, validated
 * and handed on before the next is read, so a file of millions of records never sits in memory.
 * Both parsers hand a number over as a {@link JsonNumber} holding its source text: an int64 id is
 * never rounded through a JS `number`, and a number is still told apart from a string.
 *
 * The first problem stops the reading with an {@link ImportFileError} whose message names where it
 * is (`line N` in NDJSON, `record N` in an array, `line N, column C` for malformed JSON) and why.
 */
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream'
import { pipeline as pipelineAsync } from 'node:stream/promises'
import { parse as parseLosslessJson } from 'lossless-json'
import type { Token } from 'stream-json/parser.js'
import streamArray from 'stream-json/streamers/stream-array.js'
import type { StreamBaseOptions } from 'stream-json/streamers/stream-base.js'
import withParser from 'stream-json/utils/with-parser.js'
import verifier from 'stream-json/utils/verifier.js'
import type { Pet } from '../schemas/pet.js'
import { parseDateTime } from './date-time.js'
import { INT64_MAX, parseInt64 } from './int64.js'
import { CANCELLATION_REASONS, type CancellationReason } from './order-pages.js'
import { ORDER_STATUSES, type OrderRecord, type OrderStatus } from './orders.js'

/** Where the records come from. `open` may be called more than once (once more to locate a syntax error). */
export interface ImportSource {
  open(): Readable
}

export type ImportFormat = 'json-array' | 'ndjson'

/** A problem with one record or with the file; the message is `<position>: <reason>`. */
export class ImportFileError extends Error {
  readonly position: string | undefined
  readonly reason: string
  constructor(position: string | undefined, reason: string) {
    super(position === undefined ? reason : `${position}: ${reason}`)
    this.name = 'ImportFileError'
    this.position = position
    this.reason = reason
  }
}

/** A record that breaks a rule; the reader adds its position. */
export class InvalidRecordError extends Error {
  constructor(reason: string) {
    super(reason)
    this.name = 'InvalidRecordError'
  }
}

/** A JSON number as written in the file: `text` is its source text, digit for digit. */
export class JsonNumber {
  readonly text: string
  constructor(text: string) {
    this.text = text
  }
  toString(): string {
    return this.text
  }
}

/** One parsed JSON value and where it was. Numbers are {@link JsonNumber}s. */
export interface RawRecord {
  position: string
  value: unknown
}

/**
 * The most one record may take: a line of NDJSON, in bytes (its line break not counted), or an
 * element of a JSON array, in characters of its keys, strings and numbers. A longer one stops the
 * import with its position: it cannot be an order or a pet, and reading it whole could exhaust
 * memory (a JavaScript string holds at most ~512 MiB).
 */
export const MAX_RECORD_BYTES = 1024 * 1024

export const MAX_QUANTITY = 2_147_483_647
export const MAX_PET_NAME_LENGTH = 200
export const MAX_PET_TAG_LENGTH = 200

const ORDER_FIELDS = ['id', 'petId', 'quantity', 'shipDate', 'complete', 'status', 'cancelledAt', 'cancellationReason'] as const
const PET_FIELDS = ['id', 'name', 'tag'] as const

// ---------------------------------------------------------------------------------------------
// Reading

const BOM = 0xfeff

function isJsonWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d
}

/**
 * `json-array` when the first character that is not whitespace (or a leading byte-order mark) is
 * `[`; `ndjson` otherwise, including for an empty file (which holds no records).
 */
export async function detectFormat(source: ImportSource): Promise<ImportFormat> {
  const stream = source.open()
  stream.setEncoding('utf8')
  let first = true
  try {
    for await (const chunk of stream as AsyncIterable<string>) {
      for (let i = 0; i < chunk.length; i++) {
        const code = chunk.charCodeAt(i)
        if (first && i === 0 && code === BOM) continue
        if (isJsonWhitespace(code)) continue
        return code === 0x5b /* [ */ ? 'json-array' : 'ndjson'
      }
      first = false
    }
    return 'ndjson'
  } finally {
    stream.destroy()
  }
}

/** Every JSON value of the file, in order, with its position. */
export async function* readJsonRecords(source: ImportSource): AsyncGenerator<RawRecord> {
  if ((await detectFormat(source)) === 'json-array') yield* readJsonArray(source)
  else yield* readNdjson(source)
}

async function* readJsonArray(source: ImportSource): AsyncGenerator<RawRecord> {
  const input = source.open()
  // streamArray.withParserAsStream({ numberAsString: true }), with one more stage: numberAsString
  // keeps a number's source text (9223372036854775807 stays exact) but makes it a string, so each
  // number token is wrapped in a JsonNumber first, and the assembler stores that as it is.
  const options: StreamBaseOptions = { numberAsString: true }
  const items = withParser.asStream(
    (streamOptions?: StreamBaseOptions) =>
      [capRecordSize(MAX_RECORD_BYTES), markNumber, streamArray(streamOptions)] as unknown as ReturnType<typeof streamArray>,
    options,
  )
  // Errors of either side come out of the iteration below; ending it early destroys both.
  pipeline(input, items, () => {})
  let index = 0
  try {
    for await (const item of items as AsyncIterable<{ key: number; value: unknown }>) {
      index++
      yield { position: `record ${index}`, value: item.value }
    }
  } catch (error) {
    if (isParserError(error)) throw await locateSyntaxError(source, error, index)
    throw error
  }
}

/**
 * A stage between the parser and the assembler that stops an element of the top-level array
 * larger than `max` characters (keys, strings and numbers; the parser drops whitespace) before it
 * is assembled: the parser streams a long string in chunks, so this sees it grow.
 */
function capRecordSize(max: number): (token: Token) => Token {
  let depth = 0
  let record = 0
  let size = 0
  return (token) => {
    switch (token.name) {
      case 'startObject':
      case 'startArray':
        if (depth === 1) startRecord()
        depth++
        break
      case 'endObject':
      case 'endArray':
        depth--
        break
      case 'startString':
      case 'startNumber':
      case 'nullValue':
      case 'trueValue':
      case 'falseValue':
        if (depth === 1) startRecord()
        break
      case 'stringChunk':
      case 'numberChunk':
        size += token.value.length
        if (size > max) throw new ImportFileError(`record ${record}`, `larger than ${formatBytes(max)}, the most one record may take`)
        break
    }
    return token
  }
  function startRecord(): void {
    record++
    size = 0
  }
}

function markNumber(token: Token): Token | { name: 'numberValue'; value: JsonNumber } {
  return token.name === 'numberValue' ? { name: 'numberValue', value: new JsonNumber(token.value) } : token
}

function isParserError(error: unknown): error is Error {
  // "Parser cannot parse input: …" mid-file, "Parser has expected a value" at a file cut short.
  return error instanceof Error && (error as NodeJS.ErrnoException).code === undefined && /cannot parse input|^parser has expected/i.test(error.message)
}

/**
 * The streaming parser says only what is wrong; a second pass with stream-json's verifier, which
 * tracks lines and columns, says where. Only a malformed file pays for it.
 */
async function locateSyntaxError(source: ImportSource, parserError: Error, recordsRead: number): Promise<ImportFileError> {
  const input = source.open()
  input.setEncoding('utf8')
  let characters = 0
  try {
    await pipelineAsync(
      input,
      async function* (chunks: AsyncIterable<string>) {
        for await (const chunk of chunks) {
          characters += chunk.length
          yield chunk
        }
      },
      verifier.asStream(),
    )
  } catch (error) {
    const { line, pos, offset } = error as { line?: unknown; pos?: unknown; offset?: unknown }
    if (typeof line === 'number' && typeof pos === 'number') {
      // The verifier counts characters; an error at the very end is a file cut short.
      const reason = offset === characters ? 'unexpected end of file' : syntaxReason((error as Error).message)
      return new ImportFileError(`line ${line}, column ${pos}`, `malformed JSON: ${reason}`)
    }
  }
  return new ImportFileError(`after record ${recordsRead}`, `malformed JSON: ${syntaxReason(parserError.message)}`)
}

function syntaxReason(message: string): string {
  const reason = message
    .replace(/^ERROR at \d+ \(\d+, \d+\):\s*/, '')
    .replace(/^(Verifier|Parser) (cannot parse input:|has)\s*/, '')
    .trim()
  return reason === '' ? 'unexpected input' : reason
}

async function* readNdjson(source: ImportSource): AsyncGenerator<RawRecord> {
  const input = source.open()
  let lineNumber = 0
  try {
    for await (const text of readLines(input, MAX_RECORD_BYTES)) {
      lineNumber++
      const line = lineNumber === 1 && text.charCodeAt(0) === BOM ? text.slice(1) : text
      if (isBlank(line)) continue // blank lines (a trailing newline, say) hold no record
      let value: unknown
      try {
        value = parseJsonText(line)
      } catch (error) {
        const message = (error as Error).message
        const at = / at position (\d+)\s*$/.exec(message)
        const column = at === null ? '' : `, column ${Number(at[1]) + 1}`
        throw new ImportFileError(`line ${lineNumber}${column}`, `malformed JSON: ${lowerFirst(message.replace(/ at position \d+\s*$/, ''))}`)
      }
      yield { position: `line ${lineNumber}`, value }
    }
  } finally {
    input.destroy()
  }
}

/**
 * The lines of `input`, split at LF (a CR before it is dropped: CRLF works too), decoded as UTF-8.
 * A line longer than `max` bytes stops the reading with an ImportFileError naming it, as soon as
 * it is that long: it is never held whole.
 */
export async function* readLines(input: AsyncIterable<Buffer | string>, max: number): AsyncGenerator<string> {
  let held: Buffer[] = []
  let heldBytes = 0
  let lineNumber = 0
  const tooLong = (): ImportFileError =>
    new ImportFileError(`line ${lineNumber + 1}`, `longer than ${formatBytes(max)}, the most one record may take`)
  const take = (last: Buffer): string => {
    let line = held.length === 0 ? last : Buffer.concat([...held, last])
    if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, -1)
    held = []
    heldBytes = 0
    lineNumber++
    return line.toString('utf8')
  }
  for await (const data of input) {
    const chunk = typeof data === 'string' ? Buffer.from(data) : data
    let start = 0
    for (let end = chunk.indexOf(0x0a); end !== -1; start = end + 1, end = chunk.indexOf(0x0a, start)) {
      // Bytes before the LF, a CR included.
      if (heldBytes + (end - start) > max) throw tooLong()
      yield take(chunk.subarray(start, end))
    }
    if (start < chunk.length) {
      heldBytes += chunk.length - start
      if (heldBytes > max) throw tooLong()
      held.push(chunk.subarray(start))
    }
  }
  if (heldBytes > 0) yield take(Buffer.alloc(0))
}

function formatBytes(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`
}

/** One JSON text, the way NDJSON lines are parsed: numbers as JsonNumber, a repeated key's last value wins. */
export function parseJsonText(text: string): unknown {
  return parseLosslessJson(text, null, {
    parseNumber: (digits) => new JsonNumber(digits), // the source text: exact, whatever its size
    onDuplicateKey: ({ newValue }) => newValue, // as JSON.parse does, and the array reader
  })
}

function isBlank(line: string): boolean {
  for (let i = 0; i < line.length; i++) if (!isJsonWhitespace(line.charCodeAt(i))) return false
  return true
}

/** The records of the file, validated; the first invalid one throws an ImportFileError naming its position. */
export async function* readValidated<T>(
  source: ImportSource,
  validate: (value: unknown) => T,
  onRecord?: (position: string) => void,
): AsyncGenerator<T> {
  for await (const { position, value } of readJsonRecords(source)) {
    let record: T
    try {
      record = validate(value)
    } catch (error) {
      if (error instanceof InvalidRecordError) throw new ImportFileError(position, error.message)
      throw error
    }
    onRecord?.(position)
    yield record
  }
}

export function readOrderRecords(source: ImportSource, onRecord?: (position: string) => void): AsyncGenerator<OrderRecord> {
  return readValidated(source, validateOrderRecord, onRecord)
}

/**
 * Where the order `id` is in the file: the position of its last record (the one an import keeps),
 * or undefined. A second pass, made only to name the record a store refused.
 */
export async function locateOrder(source: ImportSource, id: bigint): Promise<string | undefined> {
  let position: string | undefined
  let found: string | undefined
  for await (const record of readOrderRecords(source, (at) => (position = at))) if (record.id === id) found = position
  return found
}

export function readPetRecords(source: ImportSource, onRecord?: (position: string) => void): AsyncGenerator<Pet> {
  return readValidated(source, validatePetRecord, onRecord)
}

// ---------------------------------------------------------------------------------------------
// Validation. Values come from the readers above: numbers are JsonNumbers.

/**
 * An order record: `{id, petId, quantity, shipDate, complete, status, cancelledAt, cancellationReason}`.
 * - `id`: required; `petId`: optional — both integers from 1 to 2^63−1, as JSON integers or decimal
 *   strings (int64 ids often travel as strings).
 * - `quantity`: optional, an integer from 1 to 2147483647.
 * - `shipDate`: optional, RFC 3339 with a timezone; stored in UTC (`toISOString()`).
 * - `complete`: optional boolean (false); true only when `status` is `shipped`.
 * - `status`: optional, `pending` (default), `shipped` or `cancelled`.
 * - `cancelledAt`: optional, RFC 3339 with a timezone, as `shipDate`; a cancelled order only.
 * - `cancellationReason`: optional, one of CANCELLATION_REASONS; a cancelled order only.
 * `null` is the same as absent. Any other field is refused.
 */
export function validateOrderRecord(value: unknown): OrderRecord {
  const record = objectWith(value, ORDER_FIELDS, 'an order')
  const id = positiveInt64(record.id, 'id', true)!
  const petId = positiveInt64(record.petId, 'petId', false)
  const quantity = optionalQuantity(record.quantity)
  const shipDate = optionalDateTime(record.shipDate, 'shipDate')
  const status = optionalStatus(record.status)
  const complete = optionalBoolean(record.complete, 'complete')
  if (complete && status !== 'shipped') {
    throw new InvalidRecordError(`complete is true but status is "${status}"; only a shipped order can be complete`)
  }
  const cancelledAt = optionalDateTime(record.cancelledAt, 'cancelledAt')
  const cancellationReason = optionalReason(record.cancellationReason)
  if (status !== 'cancelled') {
    const given = cancelledAt !== null ? 'cancelledAt' : cancellationReason !== null ? 'cancellationReason' : undefined
    if (given !== undefined) {
      throw new InvalidRecordError(`order ${id}: ${given} is given but status is "${status}"; only a cancelled order has one`)
    }
  }
  const order: OrderRecord = { id, petId, quantity, shipDate, complete, status }
  if (cancelledAt !== null) order.cancelledAt = cancelledAt
  if (cancellationReason !== null) order.cancellationReason = cancellationReason
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
  let quantity: number | undefined
  if (value instanceof JsonNumber && /^-?[0-9]{1,12}$/.test(value.text)) quantity = Number(value.text)
  if (quantity === undefined || quantity < 1 || quantity > MAX_QUANTITY) {
    throw new InvalidRecordError(`quantity must be an integer from 1 to ${MAX_QUANTITY}, got ${describe(value)}`)
  }
  return quantity
}

function optionalBoolean(value: unknown, field: string): boolean {
  if (isAbsent(value)) return false
  if (typeof value !== 'boolean') throw new InvalidRecordError(`${field} must be true or false, got ${describe(value)}`)
  return value
}

function optionalStatus(value: unknown): OrderStatus {
  if (isAbsent(value)) return 'pending'
  if (typeof value !== 'string' || !(ORDER_STATUSES as readonly string[]).includes(value)) {
    throw new InvalidRecordError(`status must be one of ${ORDER_STATUSES.join(', ')}, got ${describe(value)}`)
  }
  return value as OrderStatus
}

function optionalReason(value: unknown): CancellationReason | null {
  if (isAbsent(value)) return null
  if (typeof value !== 'string' || !(CANCELLATION_REASONS as readonly string[]).includes(value)) {
    throw new InvalidRecordError(`cancellationReason must be one of ${CANCELLATION_REASONS.join(', ')}, got ${describe(value)}`)
  }
  return value as CancellationReason
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

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1)
}
