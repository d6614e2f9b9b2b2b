import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { commaJoinedLines } from '../src/store/postgres/copy-lines.js'

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
