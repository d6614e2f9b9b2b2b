const NEWLINE = 0x0a
const COMMA = 0x2c
const BACKSLASH = 0x5c

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
