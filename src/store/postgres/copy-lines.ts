const NEWLINE = 0x0a
const COMMA = 0x2c
const BACKSLASH = 0x5c
const CLOSING_BRACKET = 0x5d

/**
 * The output of `COPY (SELECT one_text_column …) TO STDOUT` (text format: one line per row, each
 * ended by a newline) as runs of whole rows joined by commas: each chunk the socket brought becomes
 * one page, without the newline of its last row; a row cut between two chunks is carried to the next
 * page. Pages are the chunks' own memory, rewritten in place: no string is made.
 *
 * The text format escapes a backslash, and control characters, as backslash sequences. The list's
 * JSON contains none of those, so a backslash in the output means a row is not what it should be: it
 * is refused rather than sent altered.
 */
export async function* commaJoinedLines(chunks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let carried: Buffer | undefined // the start of a row whose newline has not arrived yet
  for await (const chunk of chunks) {
    if (chunk.length === 0) continue
    if (chunk.includes(BACKSLASH)) throw new Error('COPY escaped a character of the list: its rows must contain no backslash or control character')
    const end = chunk.lastIndexOf(NEWLINE)
    if (end === -1) {
      carried = carried === undefined ? chunk : Buffer.concat([carried, chunk])
      continue
    }
    const page = carried === undefined ? chunk.subarray(0, end) : Buffer.concat([carried, chunk.subarray(0, end)])
    carried = end + 1 < chunk.length ? chunk.subarray(end + 1) : undefined
    for (let at = page.indexOf(NEWLINE); at !== -1; at = page.indexOf(NEWLINE, at + 1)) page[at] = COMMA
    yield page
  }
  if (carried !== undefined) throw new Error('COPY output ended in the middle of a row')
}

/**
 * COPY's CSV format with a delimiter and a quote character that JSON text never holds (control
 * characters, which JSON escapes): CSV quotes a value only when it holds one of those or a line
 * break, which JSON also escapes, so every value comes out verbatim. (The text format would double
 * every backslash, as in a cancellation reason's escapes.) A NULL comes out as another control
 * character, which is refused.
 */
export const VERBATIM_CSV = `FORMAT csv, DELIMITER E'\\x01', QUOTE E'\\x02', NULL E'\\x03'`
const QUOTE = 0x02
/** How VERBATIM_CSV writes a NULL (CSV's default, an empty line, would make `,,` of the array). */
const NULL = 0x03

const OPEN_BRACKET = Buffer.from('[')
const EMPTY_ARRAY = Buffer.from('[]')

/**
 * A JSON array in parts, to be written one after the other: the parts share the COPY output's memory
 * and constant buffers, so they are read, never written to.
 */
export interface JsonArrayParts {
  parts: Buffer[]
  /** How many rows COPY sent. */
  rows: number
  /** The last row the array holds, a copy of its text (undefined when it holds none). */
  last: Buffer | undefined
}

/**
 * The output of `COPY (SELECT json_text …) TO STDOUT WITH (VERBATIM_CSV)` (a JSON value a row, each
 * ended by a newline, cut into chunks anywhere) as a JSON array of its first `keep` rows, in place:
 * the kept rows' newlines become commas and the last one `]`, a `[` goes in front, and whatever
 * follows is left out. No row is copied or decoded, but the last one kept.
 */
export function jsonArrayOfRows(chunks: Buffer[], keep = Infinity): JsonArrayParts {
  const ends: [chunk: number, at: number][] = []
  chunks.forEach((chunk, c) => {
    if (chunk.includes(QUOTE)) throw new Error('COPY quoted a value: a row is not the JSON text it should be')
    if (chunk.includes(NULL)) throw new Error('COPY sent a NULL row: a JSON text was expected')
    for (let at = chunk.indexOf(NEWLINE); at !== -1; at = chunk.indexOf(NEWLINE, at + 1)) ends.push([c, at])
  })
  const [lastChunk, lastEnd] = ends.at(-1) ?? [-1, -1]
  const tail = chunks.slice(lastChunk + 1)
  if ((lastChunk >= 0 && lastEnd !== chunks[lastChunk]!.length - 1) || tail.some((chunk) => chunk.length > 0)) {
    throw new Error('COPY output ended in the middle of a row')
  }
  const kept = Math.min(ends.length, keep)
  if (kept === 0) return { parts: [EMPTY_ARRAY], rows: ends.length, last: undefined }
  for (let i = 0; i < kept - 1; i++) chunks[ends[i]![0]]![ends[i]![1]] = COMMA
  const [c, at] = ends[kept - 1]!
  chunks[c]![at] = CLOSING_BRACKET
  const [startChunk, startAt] = kept > 1 ? [ends[kept - 2]![0], ends[kept - 2]![1] + 1] : [0, 0]
  const last =
    startChunk === c
      ? Buffer.from(chunks[c]!.subarray(startAt, at))
      : Buffer.concat([chunks[startChunk]!.subarray(startAt), ...chunks.slice(startChunk + 1, c), chunks[c]!.subarray(0, at)])
  return { parts: [OPEN_BRACKET, ...chunks.slice(0, c), chunks[c]!.subarray(0, at + 1)], rows: ends.length, last }
}
