import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { binaryCopyRows, commaJoinedLines, jsonArrayOf, rowAt } from '../src/store/postgres/copy-lines.js'
import { literal, PostgresDatabase } from '../src/store/postgres/database.js'
import { postgresSkipReason } from './support/postgres.js'

/** The pages of `chunks` (copies: the pages may share the chunks' memory). */
async function pagesOf(chunks: string[]): Promise<string[]> {
  async function* source(): AsyncGenerator<Buffer> {
    for (const chunk of chunks) yield Buffer.from(chunk)
  }
  const pages: string[] = []
  for await (const page of commaJoinedLines(source())) pages.push(page.toString())
  return pages
}

const ROWS = ['{"id":1,"complete":false}', '{"id":-22,"petId":3,"complete":true}', '{"id":333,"shipDate":"2026-11-26T00:00:00.000Z","complete":false}']
const COPY_OUTPUT = ROWS.map((row) => `${row}\n`).join('')

describe('commaJoinedLines (the COPY output of the PostgreSQL list)', () => {
  it('joins the rows with commas, whatever the chunks, cut anywhere', async () => {
    assert.deepEqual(await pagesOf([COPY_OUTPUT]), [ROWS.join(',')])
    for (let cut = 0; cut <= COPY_OUTPUT.length; cut++) {
      for (let second = cut; second <= COPY_OUTPUT.length; second++) {
        const chunks = [COPY_OUTPUT.slice(0, cut), COPY_OUTPUT.slice(cut, second), COPY_OUTPUT.slice(second)]
        const pages = await pagesOf(chunks)
        assert.ok(pages.every((page) => page.startsWith('{') && page.endsWith('}')), `whole rows only: cuts at ${cut}, ${second}`)
        assert.equal(pages.join(','), ROWS.join(','), `cuts at ${cut}, ${second}`)
      }
    }
  })

  it('gives nothing for no rows', async () => {
    assert.deepEqual(await pagesOf([]), [])
    assert.deepEqual(await pagesOf(['', '']), [])
  })

  it('refuses an escaped character rather than send it altered', async () => {
    await assert.rejects(pagesOf(['{"id":1,"note":"a\\\\b"}\n']), /no backslash or control character/)
  })

  it('refuses output that ends in the middle of a row', async () => {
    await assert.rejects(pagesOf([COPY_OUTPUT, '{"id":4']), /ended in the middle of a row/)
  })
})

/** What `COPY (…) TO STDOUT (FORMAT binary)` sends for rows of one text value each (PostgreSQL's documentation, COPY, "Binary Format"). */
function binaryCopy(rows: string[], extension = ''): Buffer {
  const header = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(4), Buffer.alloc(4), Buffer.from(extension)])
  header.writeUInt32BE(extension.length, 15)
  const tuples = rows.map((row) => {
    const value = Buffer.from(row)
    const framing = Buffer.alloc(6)
    framing.writeInt16BE(1, 0)
    framing.writeInt32BE(value.length, 2)
    return Buffer.concat([framing, value])
  })
  return Buffer.concat([header, ...tuples, Buffer.from([0xff, 0xff])])
}

/** `output` cut at the given offsets. */
const cutAt = (output: Buffer, cuts: number[]): Buffer[] => [0, ...cuts].map((start, i) => output.subarray(start, [...cuts, output.length][i]))

describe('binaryCopyRows and jsonArrayOf (a page read by COPY in binary format, as a JSON array)', () => {
  const output = binaryCopy(ROWS)

  it('finds every row, whatever the chunks, cut anywhere, and makes any run of them a JSON array', () => {
    for (let cut = 0; cut <= output.length; cut++) {
      for (let second = cut; second <= output.length; second += 3) {
        const rows = binaryCopyRows(cutAt(output, [cut, second]))
        const where = `cuts at ${cut}, ${second}`
        assert.deepEqual(rows.starts.map((_, row) => rowAt(rows, row).toString()), ROWS, where)
        assert.equal(jsonArrayOf(rows).toString(), `[${ROWS.join(',')}]`, where)
      }
    }
    const rows = binaryCopyRows([output])
    assert.equal(jsonArrayOf(rows, 0, 2).toString(), `[${ROWS[0]},${ROWS[1]}]`)
    assert.equal(jsonArrayOf(rows, 1, 3).toString(), `[${ROWS[1]},${ROWS[2]}]`)
    assert.equal(jsonArrayOf(rows, 2, 3).toString(), `[${ROWS[2]}]`)
    assert.equal(jsonArrayOf(rows, 3, 3).toString(), '[]')
  })

  it('reads past a header extension, and gives no rows for none', () => {
    assert.deepEqual(binaryCopyRows([binaryCopy(ROWS, 'extension')]).starts.length, 3)
    const none = binaryCopyRows([binaryCopy([])])
    assert.equal(none.starts.length, 0)
    assert.equal(jsonArrayOf(none).toString(), '[]')
  })

  it('refuses output that is not binary, a row of another shape, a NULL, or output cut short or going on', () => {
    assert.throws(() => binaryCopyRows([Buffer.from(`${ROWS.join('\n')}\n`)]), /not in binary format/)
    const twoValues = Buffer.from(output)
    twoValues.writeInt16BE(2, 19)
    assert.throws(() => binaryCopyRows([twoValues]), /a row of 2 values/)
    const withOids = Buffer.from(output)
    withOids.writeUInt32BE(1 << 16, 11)
    assert.throws(() => binaryCopyRows([withOids]), /flags this reader does not know/)
    const laterFlag = Buffer.from(output)
    laterFlag.writeUInt32BE(1 << 20, 11) // bits 17–31 mark changes a reader may pass
    assert.equal(binaryCopyRows([laterFlag]).starts.length, 3)
    const withNull = Buffer.from(output)
    withNull.writeInt32BE(-1, 21)
    assert.throws(() => binaryCopyRows([withNull]), /a NULL row/)
    for (let end = 1; end < output.length; end++) assert.throws(() => binaryCopyRows([output.subarray(0, end)]), /ended early/, `cut at ${end}`)
    assert.throws(() => binaryCopyRows([output, Buffer.from('x')]), /goes on after its end/)
  })
})

describe('copyRows and literal [postgres]: values come back verbatim, literals exactly', async () => {
  const reason = await postgresSkipReason()
  if (reason !== undefined) {
    it('PostgreSQL', { skip: reason }, () => {})
    return
  }
  let database: PostgresDatabase
  before(() => {
    database = new PostgresDatabase(process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
  })
  after(() => database.close())

  it('sends every JSON text as it is: backslashes, quotes, commas, control escapes, non-ASCII', async () => {
    const values = [
      { reason: 'a "quoted" word, then a \\ backslash', n: 1 },
      { text: 'tab\there\nline\u0001\u0002', emoji: 'chat 🐈 é' }, // control characters, which JSON escapes
      'plain',
      { nested: { deep: [1, 2, { x: null }] } },
    ].map((value) => JSON.stringify(value))
    const query = values.map((value) => `SELECT ${literal(value)}`).join(' UNION ALL ')
    const rows = await database.copyRows(query)
    assert.deepEqual(rows.starts.map((_, row) => rowAt(rows, row).toString()), values)
    assert.equal(jsonArrayOf(rows).toString(), `[${values.join(',')}]`)
  })

  it('writes literals that read back as the same values, and refuses anything else', async () => {
    const texts = ["it's", "'; DROP TABLE orders; --", 'back\\slash', 'E\'x\'']
    const ints = [-(2n ** 63n), 2n ** 63n - 1n, 0n, 2n ** 53n + 1n]
    const { rows } = await database.read<{ value: string }>(
      [...texts.map((t) => `SELECT ${literal(t)} AS value`), ...ints.map((i) => `SELECT (${literal(i)})::text`), `SELECT ${literal(true)}::text`, `SELECT ${literal(1001)}::text`].join(' UNION ALL '),
    )
    assert.deepEqual(
      rows.map((row) => row.value),
      [...texts, ...ints.map(String), 'true', '1001'],
    )
    assert.throws(() => literal(1.5), RangeError)
    assert.throws(() => literal(undefined as unknown as string), TypeError)
  })
})
