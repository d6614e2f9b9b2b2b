import assert from 'node:assert/strict'
import Database from 'better-sqlite3'
import pg from 'pg'
import type { TestServer } from './harness.js'

/** A v2 Order as read from a response's text, ids kept exact (as decimal strings). */
export interface WireOrder {
  id: string
  petId?: string
  quantity?: number
  shipDate?: string
  complete: boolean
  status: string
  cancelledAt?: string
  cancellationReason?: string
  version: number
  metadata?: Record<string, string>
}

/** Parses a JSON text whose int64 fields (id, petId) become decimal strings, exactly. */
export function parseExact<T>(text: string): T {
  return JSON.parse(text.replace(/"(id|petId)":(-?[0-9]+)/g, '"$1":"$2"')) as T
}

export interface Page {
  status: number
  link: string | null
  data: WireOrder[]
  nextCursor?: string
  text: string
}

export async function getPage(server: TestServer, key: string, query: string): Promise<Page> {
  const response = await fetch(`${server.origin}/v2/store/orders${query === '' ? '' : `?${query}`}`, {
    headers: { authorization: `Bearer ${key}` },
  })
  const text = await response.text()
  assert.equal(response.status, 200, `${query}: ${text}`)
  const body = parseExact<{ data: WireOrder[]; nextCursor?: string }>(text)
  return { status: response.status, link: response.headers.get('link'), text, ...body }
}

/** Every page of a list with these parameters, following nextCursor; the limit of each page from `limits`. */
export async function walk(server: TestServer, key: string, params: Record<string, string>, limits: () => number): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = []
  let cursor: string | undefined
  let pages = 0
  for (;;) {
    const query = new URLSearchParams({ ...params, limit: String(limits()), ...(cursor === undefined ? {} : { cursor }) })
    const page = await getPage(server, key, query.toString())
    pages++
    ids.push(...page.data.map((order) => order.id))
    if (page.nextCursor === undefined) {
      assert.equal(page.link, null, 'no Link without nextCursor')
      return { ids, pages }
    }
    assert.ok(page.data.length > 0, 'a page before the last is not empty')
    cursor = page.nextCursor
    if (pages > 10_000) assert.fail('the walk does not end')
  }
}

/**
 * Runs SQL on the server's database directly (both stores; `?` placeholders). Resolves with the first
 * column of the first row it returns, as the driver reads it (undefined if none).
 */
export async function sql(server: Pick<TestServer, 'database'>, text: string, params: unknown[] = []): Promise<unknown> {
  const { config } = server.database
  if (config.kind === 'sqlite') {
    const db = new Database(config.path)
    try {
      const statement = db.prepare(text)
      if (statement.reader) return statement.pluck().get(...params)
      statement.run(...params)
      return undefined
    } finally {
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: config.url })
  await client.connect()
  try {
    let n = 0
    const { rows } = await client.query<unknown[]>({ text: text.replace(/\?/g, () => `$${++n}`), values: params, rowMode: 'array' })
    return rows[0]?.[0]
  } finally {
    await client.end()
  }
}
