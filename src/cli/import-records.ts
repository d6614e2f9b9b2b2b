/**
 * Reading the files of `orders import` and `pets import` (each record validated by import-validation.ts).
 *
 * A file is a JSON array of records or NDJSON (one record a line), told apart by its first
 * non-whitespace character (`[` means an array). Both are streamed: the records a chunk of the file
 * completes are parsed (by V8's JSON.parse), validated and handed on before the next chunk is read,
 * so a file of millions of records never sits in memory.
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
import { StringDecoder } from 'node:string_decoder'
import { pipeline as pipelineAsync } from 'node:stream/promises'
import { parse as parseLosslessJson } from 'lossless-json'
import verifier from 'stream-json/utils/verifier.js'
import type { OrderRecord } from '../domain/orders.js'
import type { Pet } from '../schemas/pet.js'
import { InvalidRecordError, JsonNumber, validateOrderRecord, validatePetRecord } from './import-validation.js'
import { JsonArrayElementTooLarge, JsonArrayStructureError, jsonArrayElements } from './json-array-elements.js'

/**
 * Where the records come from. The records are read in one pass of `open()`. A second pass, made
 * only to say where a malformed JSON array breaks or which record holds an order the store refused,
 * opens it again, unless `rereadable` is false: a pipe, a FIFO or a terminal (`/dev/stdin`) can be
 * read only once, and opening it again would read what follows or wait for ever.
 */
export interface ImportSource {
  open(): Readable
  rereadable?: boolean
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
/** U+FEFF in UTF-8: a byte-order mark before the first record. */
const UTF8_BOM = [0xef, 0xbb, 0xbf]

function isJsonWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d
}

/**
 * `json-array` when the first byte that is not whitespace (or part of a leading byte-order mark) is
 * `[`; `ndjson` otherwise, including for an empty input (which holds no records). Reads no more of
 * `input` than it needs to tell, and hands back the whole input, from its first byte, as `chunks`:
 * the input is read once, so a pipe works as a file does.
 */
export async function detectFormat(input: AsyncIterable<Buffer>): Promise<{ format: ImportFormat; chunks: AsyncIterable<Buffer> }> {
  const iterator = input[Symbol.asyncIterator]()
  const held: Buffer[] = []
  let ended = false
  let format: ImportFormat | undefined
  let position = 0
  let inBom = true
  while (format === undefined) {
    const next = await iterator.next()
    if (next.done === true) {
      ended = true
      format = 'ndjson'
      break
    }
    const chunk = next.value
    held.push(chunk)
    for (let i = 0; i < chunk.length && format === undefined; i++, position++) {
      const byte = chunk[i]!
      if (inBom && position < UTF8_BOM.length && byte === UTF8_BOM[position]) continue
      inBom = false
      if (!isJsonWhitespace(byte)) format = byte === 0x5b /* [ */ ? 'json-array' : 'ndjson'
    }
  }
  async function* chunks(): AsyncGenerator<Buffer> {
    yield* held
    if (ended) return
    for (let next = await iterator.next(); next.done !== true; next = await iterator.next()) yield next.value
  }
  return { format, chunks: chunks() }
}

/** Every JSON value of the file, in order, with its position. */
export async function* readJsonRecords(source: ImportSource): AsyncGenerator<RawRecord> {
  const input = source.open()
  try {
    const { format, chunks } = await detectFormat(input as AsyncIterable<Buffer>) // no encoding set: bytes
    if (format === 'json-array') yield* readJsonArray(chunks, source)
    else yield* readNdjson(chunks)
  } finally {
    input.destroy()
  }
}

/** The text of UTF-8 `chunks` (a character split between two chunks is joined, as setEncoding does). */
async function* utf8(chunks: AsyncIterable<Buffer>): AsyncGenerator<string> {
  const decoder = new StringDecoder('utf8')
  for await (const chunk of chunks) {
    const text = decoder.write(chunk)
    if (text !== '') yield text
  }
  const last = decoder.end()
  if (last !== '') yield last
}

async function* readJsonArray(chunks: AsyncIterable<Buffer>, source: ImportSource): AsyncGenerator<RawRecord> {
  let index = 0
  try {
    for await (const texts of jsonArrayElements(utf8(chunks), MAX_RECORD_BYTES)) {
      let values: unknown[]
      try {
        // One parse for every element the chunk completed: V8's parser, not one call per record.
        values = parseJsonArray(`[${texts.join(',')}]`)
      } catch {
        // Some element is malformed. The ones before it are still handed on first, in order, as
        // when each is read alone: a bad record before it is what gets reported, not the syntax.
        values = []
        for (const text of texts) {
          try {
            values.push(parseJsonArray(`[${text}]`)[0])
          } catch (error) {
            for (const value of values) yield { position: `record ${++index}`, value }
            throw await locateSyntaxError(source, error as Error, index)
          }
        }
      }
      for (const value of values) yield { position: `record ${++index}`, value }
    }
  } catch (error) {
    if (error instanceof JsonArrayElementTooLarge) {
      throw new ImportFileError(`record ${error.index}`, `larger than ${formatBytes(MAX_RECORD_BYTES)}, the most one record may take`)
    }
    if (error instanceof JsonArrayStructureError) throw await locateSyntaxError(source, error, index)
    throw error
  }
}

type SourceReviver = (key: string, value: unknown, context?: { source?: string }) => unknown
const parseWithReviver = JSON.parse as (text: string, reviver: SourceReviver) => unknown

/**
 * Whether JSON.parse hands its reviver each number's source text (Node.js 22 and later). Then the
 * numbers are kept exact by V8's own parser; else by lossless-json, slower.
 */
const PARSE_WITH_SOURCE = parseWithReviver('1', (_key, _value, context) => context?.source) === '1'

/** JSON.parse's reviver: a number as its source text, a {@link JsonNumber}. */
function keepNumberText(_key: string, value: unknown, context?: { source?: string }): unknown {
  return typeof value === 'number' ? new JsonNumber(context!.source!) : value
}

/** One JSON text with its numbers as JsonNumbers; undefined when it is malformed. */
function tryParse(text: string): unknown {
  try {
    return parseWithReviver(text, keepNumberText)
  } catch {
    return undefined
  }
}

/** A JSON array's text whose numbers come back as JsonNumbers; a SyntaxError when it is malformed. */
function parseJsonArray(text: string): unknown[] {
  return (PARSE_WITH_SOURCE ? parseWithReviver(text, keepNumberText) : parseJsonText(text)) as unknown[]
}

/**
 * JSON.parse says what is wrong at an offset in a batch of records; a second pass with stream-json's
 * verifier, which tracks lines and columns, says where in the file. Only a malformed file pays for it.
 */
async function locateSyntaxError(source: ImportSource, parserError: Error, recordsRead: number): Promise<ImportFileError> {
  // Not expected (the verifier finds what JSON.parse refused), or an input that cannot be read
  // again: JSON.parse's own message may quote a whole batch of records, so only the structure's is
  // repeated.
  const reason = parserError instanceof JsonArrayStructureError ? parserError.message : 'unexpected input'
  const unlocated = new ImportFileError(`after record ${recordsRead}`, `malformed JSON: ${reason}`)
  if (source.rereadable === false) return unlocated
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
  return unlocated
}

function syntaxReason(message: string): string {
  const reason = message
    .replace(/^ERROR at \d+ \(\d+, \d+\):\s*/, '')
    .replace(/^(Verifier|Parser) (cannot parse input:|has)\s*/, '')
    .trim()
  return reason === '' ? 'unexpected input' : reason
}

async function* readNdjson(chunks: AsyncIterable<Buffer>): AsyncGenerator<RawRecord> {
  let lineNumber = 0
  for await (const text of readLines(chunks, MAX_RECORD_BYTES)) {
    lineNumber++
    const line = lineNumber === 1 && text.charCodeAt(0) === BOM ? text.slice(1) : text
    if (isBlank(line)) continue // blank lines (a trailing newline, say) hold no record
    let value: unknown
    try {
      // lossless-json, slower, only for a line JSON.parse refuses: its messages name the fault.
      value = PARSE_WITH_SOURCE ? tryParse(line) ?? parseJsonText(line) : parseJsonText(line)
    } catch (error) {
      const message = (error as Error).message
      const at = / at position (\d+)\s*$/.exec(message)
      const column = at === null ? '' : `, column ${Number(at[1]) + 1}`
      throw new ImportFileError(`line ${lineNumber}${column}`, `malformed JSON: ${lowerFirst(message.replace(/ at position \d+\s*$/, ''))}`)
    }
    yield { position: `line ${lineNumber}`, value }
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
 * or undefined. A second pass, made only to name the record a store refused (none for an input
 * that cannot be read again).
 */
export async function locateOrder(source: ImportSource, id: bigint): Promise<string | undefined> {
  if (source.rereadable === false) return undefined
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
