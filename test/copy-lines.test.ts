import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { commaJoinedLines, jsonArrayOfRows } from '../src/store/postgres/copy-lines.js'
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

/** jsonArrayOfRows on `output` cut at the given offsets, as one string and what it found. */
function arrayOf(output: string, cuts: number[], keep?: number): { json: string; rows: number; last: string | undefined } {
  const bounds = [0, ...cuts, output.length]
  const chunks = bounds.slice(1).map((end, i) => Buffer.from(output.slice(bounds[i], end)))
  const { parts, rows, last } = jsonArrayOfRows(chunks, keep)
  return { json: Buffer.concat(parts).toString(), rows, last: last?.toString() }
}

describe('jsonArrayOfRows (a page read by COPY, as a JSON array)', () => {
  it('makes the rows a JSON array, whatever the chunks, cut anywhere, and names the last row', () => {
    for (let cut = 0; cut <= COPY_OUTPUT.length; cut++) {
      for (let second = cut; second <= COPY_OUTPUT.length; second++) {
        const where = `cuts at ${cut}, ${second}`
        assert.deepEqual(arrayOf(COPY_OUTPUT, [cut, second]), { json: `[${ROWS.join(',')}]`, rows: 3, last: ROWS[2] }, where)
        // The page of 2 from a read of one more: the extra row is left out, wherever it was cut.
        assert.deepEqual(arrayOf(COPY_OUTPUT, [cut, second], 2), { json: `[${ROWS.slice(0, 2).join(',')}]`, rows: 3, last: ROWS[1] }, where)
        assert.deepEqual(arrayOf(COPY_OUTPUT, [cut, second], 1), { json: `[${ROWS[0]}]`, rows: 3, last: ROWS[0] }, where)
      }
    }
  })

  it('gives [] for no rows', () => {
    assert.deepEqual(arrayOf('', []), { json: '[]', rows: 0, last: undefined })
    assert.deepEqual(arrayOf('', [0, 0]), { json: '[]', rows: 0, last: undefined })
    assert.deepEqual(arrayOf(COPY_OUTPUT, [], 0), { json: '[]', rows: 3, last: undefined })
  })

  it('refuses a quoted value or output that ends in the middle of a row', () => {
    assert.throws(() => arrayOf('\x02{"id":1}\x02\n', []), /COPY quoted a value/)
    assert.throws(() => arrayOf(`${COPY_OUTPUT}{"id":4`, []), /ended in the middle of a row/)
    assert.throws(() => arrayOf(`${COPY_OUTPUT}{"id":4`, [COPY_OUTPUT.length]), /ended in the middle of a row/)
  })
})

describe('copyJsonArray and literal [postgres]: values come back verbatim, literals exactly', async () => {
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
    const page = await database.copyJsonArray(query)
    assert.equal(Buffer.concat(page.parts).toString(), `[${values.join(',')}]`)
    assert.equal(page.rows, values.length)
    assert.equal(page.last?.toString(), values.at(-1))
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
