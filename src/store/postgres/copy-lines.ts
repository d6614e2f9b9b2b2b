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

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')
const HEADER = SIGNATURE.length + 8 // then flags and the header extension's length (32 bits each)
const TRAILER = -1
const OPEN_BRACKET = 0x5b

/** The rows of a COPY in binary format: its output, and where each row's one value starts and ends in it. */
export interface CopiedRows {
  data: Buffer
  starts: number[]
  ends: number[]
}

/**
 * The output of `COPY (SELECT one_text_column …) TO STDOUT (FORMAT binary)`, cut into chunks
 * anywhere, as its rows. The binary format sends each value as its bytes after a length, so a text
 * comes back verbatim, whatever it holds (the text and CSV formats escape or quote some characters),
 * and PostgreSQL does not scan it for them. Framing: a signature, flags and a header extension, then
 * per row a 16-bit count of values and per value a 32-bit length (-1: NULL) and its bytes, then a
 * count of -1 (PostgreSQL's documentation, COPY, "Binary Format"). A row of any other shape, a NULL
 * or output that ends early is refused.
 */
export function binaryCopyRows(chunks: Buffer[]): CopiedRows {
  const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
  const fail = (problem: string): never => {
    throw new Error(`COPY output ${problem}`)
  }
  if (data.length < SIGNATURE.length ? !SIGNATURE.subarray(0, data.length).equals(data) : !data.subarray(0, SIGNATURE.length).equals(SIGNATURE)) {
    fail('is not in binary format')
  }
  if (data.length < HEADER) fail('ended early')
  // Bits 0–15 of the flags mark changes a reader must not pass; bit 16, OIDs in every row.
  if ((data.readUInt32BE(SIGNATURE.length) & 0x1ffff) !== 0) fail('has flags this reader does not know')
  const starts: number[] = []
  const ends: number[] = []
  let at = HEADER + data.readUInt32BE(HEADER - 4)
  for (;;) {
    if (at + 2 > data.length) fail('ended early')
    const values = data.readInt16BE(at)
    if (values === TRAILER) break
    if (values !== 1) fail(`has a row of ${values} values: one was expected`)
    if (at + 6 > data.length) fail('ended early')
    const length = data.readInt32BE(at + 2)
    if (length < 0) fail('has a NULL row: a JSON text was expected')
    at += 6
    if (at + length > data.length) fail('ended early')
    starts.push(at)
    at += length
    ends.push(at)
  }
  if (at + 2 !== data.length) fail('goes on after its end')
  return { data, starts, ends }
}

/** Rows `from` to `to` (exclusive) of `rows`, each a JSON text, as one JSON array. */
export function jsonArrayOf(rows: CopiedRows, from = 0, to = rows.starts.length): Buffer {
  const { data, starts, ends } = rows
  if (to <= from) return Buffer.from('[]')
  // The rows' bytes lie between the first start and the last end, 6 bytes of framing apart: those
  // become one comma each, and the brackets go around.
  const array = Buffer.allocUnsafe(ends[to - 1]! - starts[from]! - 5 * (to - from - 1) + 2)
  array[0] = OPEN_BRACKET
  let length = 1
  for (let row = from; row < to; row++) {
    length += data.copy(array, length, starts[row], ends[row])
    array[length++] = row === to - 1 ? CLOSING_BRACKET : COMMA
  }
  return array
}

/**
 * `rows` cut into pages of `limit` rows, the last one possibly fewer, at most `pages` of them: each
 * as a JSON array, with how many rows it holds, its last row's text, and the index after that row.
 */
export function jsonPagesOf(rows: CopiedRows, limit: number, pages = Infinity): { json: Buffer; count: number; last: Buffer; end: number }[] {
  const cut: { json: Buffer; count: number; last: Buffer; end: number }[] = []
  for (let from = 0; from < rows.starts.length && cut.length < pages; from += limit) {
    const end = Math.min(from + limit, rows.starts.length)
    cut.push({ json: jsonArrayOf(rows, from, end), count: end - from, last: rowAt(rows, end - 1), end })
  }
  return cut
}

/** The text of row `row` of `rows` (a view of the output, not a copy). */
export function rowAt(rows: CopiedRows, row: number): Buffer {
  return rows.data.subarray(rows.starts[row], rows.ends[row])
}
