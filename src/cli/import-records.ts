/**
 * Reading the files of `orders import` and `pets import` (each record validated by import-validation.ts).
 *
 * A file is a JSON array of records or NDJSON (one record a line), told apart by its first
 * non-whitespace character (`[` means an array). Both are streamed: a record is parsed, validated
 * and handed on before the next is read, so a file of millions of records never sits in memory.
 * Both parsers hand a number over as a {@link JsonNumber} holding its source text: an int64 id is
 * never rounded through a JS `number`, and a number is still told apart from a string. Both make
 * every key of an object an own property, as JSON.parse does: a `__proto__` key (a metadata key
 * may be one) is stored as a key, never handed to the inherited setter that would change the
 * object's prototype (test/import-records.test.ts holds both parsers to it).
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
import type { OrderRecord } from '../domain/orders.js'
import type { Pet } from '../schemas/pet.js'
import { InvalidRecordError, JsonNumber, validateOrderRecord, validatePetRecord } from './import-validation.js'

/** Where the records come from. `open` may be called more than once (once more to locate a syntax error). */
export interface ImportSource {
  open(): Readable
}

export type ImportFormat = 'json-array' | 'ndjson'

/** A problem with one record or with the file; the message is `<position>: <reason>`. */
export class ImportFileError extends Error {
  constructor(
    readonly position: string | undefined,
    readonly reason: string,
  ) {
    super(position === undefined ? reason : `${position}: ${reason}`)
    this.name = 'ImportFileError'
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
async function* readLines(input: AsyncIterable<Buffer | string>, max: number): AsyncGenerator<string> {
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
async function* readValidated<T>(
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

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1)
}
