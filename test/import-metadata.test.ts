import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, it } from 'node:test'
import { assertOk, assertOneLineError, cli, type Result } from './support/cli.js'
import { bearer, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { parseExact, sql, type WireOrder } from './support/v2.js'

const MAX = 9223372036854775807n

interface WireEvent {
  id: string
  type: string
  order: WireOrder & { version: number; metadata?: Record<string, string> }
  previous?: Record<string, unknown>
}

// `orders import` through the real CLI into the database of a running server, read back over HTTP:
// records carry metadata, an unchanged re-import writes nothing, a changed one moves the version on
// with its order.updated event, and a bad one imports nothing.
forEachStore('orders import: metadata, versions and events, read back over HTTP', (kind) => {
  let server: TestServer
  let key: string
  let scratch: string
  let files = 0

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    scratch = mkdtempSync(join(tmpdir(), 'import-metadata-test-'))
  })
  after(() => rmSync(scratch, { recursive: true, force: true }))

  function file(text: string, extension: 'json' | 'ndjson' = 'ndjson'): string {
    const path = join(scratch, `orders-${files++}.${extension}`)
    writeFileSync(path, text)
    return path
  }

  const importFile = (path: string): Promise<Result> => cli(['orders', 'import', path], { DATABASE_URL: server.database.url })

  /** GET /v2/store/orders/{id}: its exact text (int64 ids as written) and its ETag. */
  async function getOrder(id: bigint | number): Promise<{ text: string; etag: string | null }> {
    const response = await fetch(`${server.origin}/v2/store/orders/${id}`, { headers: bearer(key) })
    const text = await response.text()
    assert.equal(response.status, 200, text)
    return { text, etag: response.headers.get('etag') }
  }

  async function events(): Promise<WireEvent[]> {
    const response = await fetch(`${server.origin}/v2/store/order-events?limit=1000`, { headers: bearer(key) })
    const text = await response.text()
    assert.equal(response.status, 200, text)
    return parseExact<{ data: WireEvent[] }>(text).data
  }

  // What each order is after the first import: v2's field order, metadata as the record had it.
  const first = {
    one: '{"id":1,"complete":false,"status":"pending","version":1,"petId":7,"quantity":2,"metadata":{"customer":"c-1042","channel":"web"}}',
    max: `{"id":${MAX},"complete":true,"status":"shipped","version":1,"metadata":{"__proto__":"p","constructor":"c","cart.id":"A:9-x_1"}}`,
    three: '{"id":3,"complete":false,"status":"pending","version":1}',
    four: '{"id":4,"complete":false,"status":"pending","version":1,"metadata":{"note":"Zoë 🐈"}}',
  }
  const records = [
    '{"id": 1, "petId": 7, "quantity": 2, "metadata": {"customer": "c-1042", "channel": "web"}}',
    `{"id": ${MAX}, "status": "shipped", "complete": true, "metadata": {"__proto__": "p", "constructor": "c", "cart.id": "A:9-x_1"}}`,
    '{"id": 3, "metadata": null}',
    '{"id": "4", "metadata": {"note": "Zoë 🐈"}}',
  ]
  let ndjson: string

  it('imports orders with metadata; getOrder shows it, at version 1, ETag "1"; each has its order.created', async () => {
    ndjson = file(`${records.join('\n')}\n`)
    const imported = await importFile(ndjson)
    assertOk(imported)
    assert.equal(imported.stdout, `imported 4 orders from ${ndjson}\n`)
    for (const [id, text] of [[1n, first.one], [MAX, first.max], [3n, first.three], [4n, first.four]] as const) {
      assert.deepEqual(await getOrder(id), { text, etag: '"1"' })
    }
    const created = await events()
    assert.deepEqual(created.map((event) => [event.type, event.order.id]), [
      ['order.created', '1'],
      ['order.created', MAX.toString()],
      ['order.created', '3'],
      ['order.created', '4'],
    ])
    assert.deepEqual(created[0]!.order.metadata, { customer: 'c-1042', channel: 'web' })
    assert.deepEqual(created.map((event) => event.order.version), [1, 1, 1, 1])
  })

  it('a JSON array gives the same orders as NDJSON', async () => {
    const array = file(`[\n  ${records.join(',\n  ')}\n]\n`, 'json')
    const again = await importFile(array)
    assertOk(again)
    assert.equal(again.stdout, `imported 4 orders from ${array}: all unchanged, the database already held them as they are\n`)
    assert.equal((await events()).length, 4)
  })

  it('the same file again changes nothing: the same version, no new event', async () => {
    const before = await events()
    const again = await importFile(ndjson)
    assertOk(again)
    assert.equal(again.stdout, `imported 4 orders from ${ndjson}: all unchanged, the database already held them as they are\n`)
    for (const [id, text] of [[1n, first.one], [MAX, first.max], [3n, first.three], [4n, first.four]] as const) {
      assert.deepEqual(await getOrder(id), { text, etag: '"1"' })
    }
    assert.deepEqual(await events(), before)
  })

  it('a changed record: version 2 and an order.updated event; a record without metadata removes the order\'s', async () => {
    const before = await events()
    const changed = file(
      [
        '{"id": 1, "petId": 7, "quantity": 2, "metadata": {"customer": "c-1042", "channel": "phone"}}',
        `{"id": ${MAX}, "status": "shipped", "complete": true}`,
        '{"id": 3, "metadata": {"customer": "c-7"}}',
        '{"id": 4, "metadata": {"note": "Zoë 🐈"}}',
      ].join('\n'),
    )
    const imported = await importFile(changed)
    assertOk(imported)
    assert.deepEqual(await getOrder(1n), {
      text: '{"id":1,"complete":false,"status":"pending","version":2,"petId":7,"quantity":2,"metadata":{"customer":"c-1042","channel":"phone"}}',
      etag: '"2"',
    })
    assert.deepEqual(await getOrder(MAX), { text: `{"id":${MAX},"complete":true,"status":"shipped","version":2}`, etag: '"2"' })
    assert.deepEqual(await getOrder(3n), { text: '{"id":3,"complete":false,"status":"pending","version":2,"metadata":{"customer":"c-7"}}', etag: '"2"' })
    assert.deepEqual(await getOrder(4n), { text: first.four, etag: '"1"' }) // this record changed nothing
    const after = await events()
    assert.deepEqual(after.slice(0, before.length), before)
    const added = after.slice(before.length)
    assert.deepEqual(added.map((event) => [event.type, event.order.id, event.order.version]), [
      ['order.updated', '1', 2],
      ['order.updated', MAX.toString(), 2],
      ['order.updated', '3', 2],
    ])
    assert.deepEqual(added.map((event) => event.order.metadata), [{ customer: 'c-1042', channel: 'phone' }, undefined, { customer: 'c-7' }])
    // The database's index of metadata follows the order's (the list's metadata filter reads it).
    assert.equal(Number(await sql(server, 'SELECT count(*) FROM order_metadata WHERE order_id = ?', [MAX.toString()])), 0)
    assert.equal(await sql(server, 'SELECT value FROM order_metadata WHERE order_id = ? AND key = ?', ['1', 'channel']), 'phone')
  })

  it('bad metadata: exit 1, one line naming the record and the key, nothing imported', async () => {
    const ordersBefore = await Promise.all([1n, MAX, 3n, 4n].map((id) => getOrder(id)))
    const eventsBefore = await events()
    const keys51 = JSON.stringify(Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])))
    const cases: [string, RegExp][] = [
      [
        file('{"id": 1, "metadata": {"customer": "c-1"}}\n{"id": 5}\n{"id": 6, "metadata": {"ok": "1", "bad key": "v"}}\n'),
        /\.ndjson: line 3: metadata key "bad key" must be 1 to 40 characters of A-Z a-z 0-9 _ - \. :; nothing was imported$/,
      ],
      [
        file(`[{"id": 1, "metadata": {"customer": "c-1"}}, {"id": 5}, {"id": 6, "metadata": {"${'k'.repeat(41)}": "v"}}]`, 'json'),
        /\.json: record 3: metadata key "k{41}" must be 1 to 40 characters of A-Z a-z 0-9 _ - \. :; nothing was imported$/,
      ],
      [file('{"id": 5}\n{"id": 1, "metadata": {"qty": 3}}\n'), /line 2: metadata value of "qty" must be a string, got 3; nothing was imported$/],
      [
        file('{"id": 5}\n{"id": 1, "metadata": {"address": {"city": "Oslo"}}}\n'),
        /line 2: metadata value of "address" must be a string, got an object; nothing was imported$/,
      ],
      [
        file(`{"id": 5}\n{"id": 1, "metadata": {"note": "${'x'.repeat(501)}"}}\n`),
        /line 2: metadata value of "note" must be at most 500 characters; nothing was imported$/,
      ],
      [file(`{"id": 5}\n{"id": 1, "metadata": ${keys51}}\n`), /line 2: metadata must have at most 50 keys, got 51; nothing was imported$/],
      [file('{"id": 5}\n{"id": 1, "metadata": "c-1"}\n'), /line 2: metadata must be an object of string values, got "c-1"; nothing was imported$/],
    ]
    for (const [path, pattern] of cases) assertOneLineError(await importFile(path), 1, pattern)
    assert.deepEqual(await Promise.all([1n, MAX, 3n, 4n].map((id) => getOrder(id))), ordersBefore)
    const missing = await fetch(`${server.origin}/v2/store/orders/5`, { headers: bearer(key) })
    assert.equal(missing.status, 404, await missing.text())
    assert.deepEqual(await events(), eventsBefore)
  })
})
