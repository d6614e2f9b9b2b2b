import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { before, describe, it } from 'node:test'
import fc from 'fast-check'
import { canonicalFilters, metadataFilter, type OrderFilters } from '../src/domain/order-pages.js'
import type { OrderRecord, OrderStatus } from '../src/domain/orders.js'
import { Cursors } from '../src/http/cursor.js'
import { bearer, expectError, forEachStore, order, startTestServer, type TestServer } from './support/harness.js'
import { getPage, parseExact, sql, walk, type WireOrder } from './support/v2.js'

type Metadata = Record<string, string>
type Listed = WireOrder & { metadata?: Metadata; version: number }

const at = (day: number): string => new Date(Date.UTC(2026, 10, day)).toISOString()

/**
 * 48 orders: every third a `customer` of c-1, c-2 or c-3; every other `channel` web; every fourth
 * `tier` gold; every fifth an empty `note`; statuses, pets, completion and ship dates mixed.
 */
const ORDERS: OrderRecord[] = Array.from({ length: 48 }, (_, n) => {
  const i = n + 1
  const metadata: Metadata = {}
  if (i % 3 === 0) metadata.customer = `c-${(i % 9) / 3 + 1}`
  if (i % 2 === 0) metadata.channel = 'web'
  if (i % 4 === 0) metadata.tier = 'gold'
  if (i % 5 === 0) metadata.note = ''
  const status: OrderStatus = i % 7 === 0 ? 'cancelled' : i % 3 === 1 ? 'shipped' : 'pending'
  return order({
    id: BigInt(i),
    petId: BigInt(i % 4),
    quantity: 1,
    status,
    complete: status === 'shipped' && i % 2 === 0,
    shipDate: i % 11 === 0 ? null : at(1 + (i % 20)),
    metadata: Object.keys(metadata).length === 0 ? null : metadata,
  })
})

interface Filter {
  status?: OrderStatus[]
  petId?: bigint
  complete?: boolean
  shipDateFrom?: string
  shipDateTo?: string
  metadata: [string, string][]
}

/** The ids a filter lists, from the model: every condition must hold. */
function expected(orders: readonly OrderRecord[], filter: Filter): string[] {
  const statuses = filter.status ?? ['pending', 'shipped']
  return orders
    .filter(
      (o) =>
        statuses.includes(o.status) &&
        (filter.petId === undefined || o.petId === filter.petId) &&
        (filter.complete === undefined || o.complete === filter.complete) &&
        (filter.shipDateFrom === undefined || (o.shipDate !== null && o.shipDate >= filter.shipDateFrom)) &&
        (filter.shipDateTo === undefined || (o.shipDate !== null && o.shipDate < filter.shipDateTo)) &&
        filter.metadata.every(([key, value]) => o.metadata !== null && o.metadata !== undefined && Object.hasOwn(o.metadata, key) && o.metadata[key] === value),
    )
    .map((o) => o.id)
    .sort((a, b) => (a < b ? -1 : 1))
    .map(String)
}

function params(filter: Filter): Record<string, string> {
  const query: Record<string, string> = {}
  if (filter.status !== undefined) query.status = filter.status.join(',')
  if (filter.petId !== undefined) query.petId = String(filter.petId)
  if (filter.complete !== undefined) query.complete = String(filter.complete)
  if (filter.shipDateFrom !== undefined) query.shipDateFrom = filter.shipDateFrom
  if (filter.shipDateTo !== undefined) query.shipDateTo = filter.shipDateTo
  for (const [key, value] of filter.metadata) query[`metadata[${key}]`] = value
  return query
}

const query = (filter: Filter, extra: Record<string, string> = {}): string => new URLSearchParams({ ...params(filter), ...extra }).toString()

describe('metadata filters in canonical form (the cursor digest)', () => {
  const base: OrderFilters = { statuses: ['pending', 'shipped'] }
  const digest = (pairs: [string, string][]): string => canonicalFilters({ ...base, metadata: metadataFilter(pairs) })

  it('the same pairs in any order are the same filters; keys sorted', () => {
    assert.equal(digest([['b', '1'], ['a', '2']]), digest([['a', '2'], ['b', '1']]))
    assert.deepEqual([...metadataFilter([['tier', 'x'], ['__proto__', 'y'], ['Channel', 'z']]).keys()], ['Channel', '__proto__', 'tier'])
  })

  it('each key and each value counts, and a key is never taken for a value', () => {
    const all = [
      digest([['a', 'b']]),
      digest([['b', 'a']]),
      digest([['a', 'b,c']]),
      digest([['a', 'b'], ['c', 'd']]),
      digest([['a', 'd'], ['c', 'b']]),
      digest([['a', '']]),
      digest([['A', 'b']]),
      canonicalFilters(base),
    ]
    assert.equal(new Set(all).size, all.length)
  })

  it('a cursor of one metadata filter is refused with another', () => {
    const cursors = new Cursors(randomBytes(32))
    const cursor = cursors.encode({ ...base, metadata: metadataFilter([['customer', 'c-1']]) }, 5n)
    assert.equal(cursors.decode(cursor, { ...base, metadata: metadataFilter([['customer', 'c-1']]) }), 5n)
    for (const other of [undefined, metadataFilter([['customer', 'c-2']]), metadataFilter([['customer', 'c-1'], ['tier', 'gold']])]) {
      assert.throws(() => cursors.decode(cursor, { ...base, metadata: other }), /other filters/)
    }
  })
})

forEachStore('v2 listOrders metadata[KEY]=VALUE', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    await server.importOrders(ORDERS)
  })

  async function list(filter: Filter, extra: Record<string, string> = {}): Promise<Listed[]> {
    return (await getPage(server, key, query(filter, extra))).data as Listed[]
  }

  async function refused(search: string, code = 'invalid_parameter'): Promise<string> {
    const response = await fetch(`${server.origin}/v2/store/orders?${search}`, { headers: bearer(key) })
    return (await expectError(response, 400, code)).message as string
  }

  it('one, two and three pairs: exactly the orders holding every pair, each shown with its metadata', async () => {
    const filters: [string, string][][] = [
      [['customer', 'c-1']],
      [['channel', 'web']],
      [['tier', 'gold'], ['channel', 'web']],
      [['customer', 'c-2'], ['channel', 'web']],
      [['customer', 'c-3'], ['channel', 'web'], ['tier', 'gold']],
      [['customer', 'c-1'], ['tier', 'gold'], ['note', '']],
      [['customer', 'c-4']],
      [['nobody', 'has-it']],
    ]
    for (const metadata of filters) {
      const want = expected(ORDERS, { metadata })
      const orders = await list({ metadata }, { limit: '1000' })
      assert.deepEqual(orders.map((o) => o.id), want, JSON.stringify(metadata))
      for (const o of orders) for (const [k, v] of metadata) assert.equal(o.metadata?.[k], v)
    }
    assert.ok(expected(ORDERS, { metadata: [['customer', 'c-3'], ['channel', 'web'], ['tier', 'gold']] }).length > 0, 'three pairs match some orders')
  })

  it('an empty value matches an empty value only; values are compared exactly', async () => {
    const empty = await list({ metadata: [['note', '']] }, { limit: '1000' })
    assert.deepEqual(empty.map((o) => o.id), expected(ORDERS, { metadata: [['note', '']] }))
    assert.ok(empty.length > 0)
    for (const other of ['Web', 'web ', ' web', 'we']) assert.deepEqual(await list({ metadata: [['channel', other]] }), [])
    // `metadata[note]` with no `=` at all is the empty value too
    assert.deepEqual((await getPage(server, key, 'metadata[note]&limit=1000')).data.map((o) => o.id), empty.map((o) => o.id))
  })

  it('is ANDed with status, petId, complete and the ship date range', async () => {
    const combinations: Omit<Filter, 'metadata'>[] = [
      { status: ['cancelled'] },
      { status: ['pending'] },
      { status: ['pending', 'shipped', 'cancelled'] },
      { petId: 2n },
      { petId: 0n, status: ['shipped', 'cancelled'] },
      { complete: true },
      { complete: false, status: ['shipped'] },
      { shipDateFrom: at(5) },
      { shipDateTo: at(9) },
      { shipDateFrom: at(4), shipDateTo: at(12), status: ['pending', 'shipped', 'cancelled'] },
      { petId: 0n, complete: false, shipDateFrom: at(1), shipDateTo: at(30) },
    ]
    for (const others of combinations) {
      for (const metadata of [[['channel', 'web']], [['customer', 'c-3'], ['channel', 'web']], [['tier', 'gold'], ['channel', 'web'], ['note', '']]] as [string, string][][]) {
        const filter = { ...others, metadata }
        assert.deepEqual((await list(filter, { limit: '1000' })).map((o) => o.id), expected(ORDERS, filter), query(filter))
      }
    }
  })

  it('pages and cursors: a walk at any limit lists each match once, in order; nextCursor and Link exactly when more follow', async () => {
    const filter: Filter = { metadata: [['channel', 'web']], status: ['pending', 'shipped', 'cancelled'] }
    const all = expected(ORDERS, filter)
    assert.ok(all.length >= 20)
    for (const limit of [1, 2, 3, 7, all.length - 1, all.length, all.length + 1]) {
      const { ids, pages } = await walk(server, key, params(filter), () => limit)
      assert.deepEqual(ids, all, `limit ${limit}`)
      assert.equal(pages, Math.max(1, Math.ceil(all.length / limit)), `limit ${limit}`)
    }
    // The Link of a page is the next page, with the same metadata parameters.
    const first = await getPage(server, key, query(filter, { limit: '5' }))
    assert.match(first.link!, /metadata%5Bchannel%5D=web/)
    const [, next] = /^<([^>]+)>; rel="next"$/.exec(first.link!)!
    const linked = await getPage(server, key, next!.split('?')[1]!)
    assert.deepEqual(linked.data.map((o) => o.id), all.slice(5, 10))
    // limit may change from page to page; the metadata, given in another order, is the same filter
    const two: Filter = { metadata: [['tier', 'gold'], ['channel', 'web']] }
    const page = await getPage(server, key, query(two, { limit: '2' }))
    const swapped = await getPage(server, key, `metadata[channel]=web&metadata[tier]=gold&limit=50&cursor=${page.nextCursor}`)
    assert.deepEqual([...page.data, ...swapped.data].map((o) => o.id), expected(ORDERS, two))
  })

  it('every walk, with random filters and limits, equals filtering a model of the orders (property)', async () => {
    const pairArb = fc.constantFrom<[string, string]>(['customer', 'c-1'], ['customer', 'c-2'], ['channel', 'web'], ['tier', 'gold'], ['note', ''])
    const filterArb = fc.record(
      {
        status: fc.uniqueArray(fc.constantFrom<OrderStatus>('pending', 'shipped', 'cancelled'), { minLength: 1, maxLength: 3 }),
        petId: fc.constantFrom(0n, 1n, 2n),
        complete: fc.boolean(),
        shipDateFrom: fc.constantFrom(at(3), at(8)),
        shipDateTo: fc.constantFrom(at(12), at(25)),
        metadata: fc.uniqueArray(pairArb, { minLength: 1, maxLength: 3, selector: ([k]) => k }),
      },
      { requiredKeys: ['metadata'] },
    )
    await fc.assert(
      fc.asyncProperty(filterArb, fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 4 }), async (filter, limits) => {
        let i = 0
        const { ids } = await walk(server, key, params(filter), () => limits[i++ % limits.length]!)
        assert.deepEqual(ids, expected(ORDERS, filter))
      }),
      { numRuns: kind === 'sqlite' ? 80 : 40 },
    )
  })

  it('a cursor used with another metadata filter, or none, is 400 invalid_cursor', async () => {
    const filter: Filter = { metadata: [['channel', 'web']] }
    const { nextCursor } = await getPage(server, key, query(filter, { limit: '2' }))
    assert.ok(nextCursor !== undefined)
    const others: Filter[] = [
      { metadata: [] },
      { metadata: [['channel', 'app']] },
      { metadata: [['channel', 'Web']] },
      { metadata: [['tier', 'web']] },
      { metadata: [['channel', 'web'], ['tier', 'gold']] },
    ]
    for (const other of others) {
      const message = await refused(query(other, { limit: '2', cursor: nextCursor }), 'invalid_cursor')
      assert.match(message, /other filters.*metadata/)
    }
    // and a cursor of an unfiltered page is refused with a metadata filter
    const plain = await getPage(server, key, 'limit=2')
    await refused(query(filter, { limit: '2', cursor: plain.nextCursor! }), 'invalid_cursor')
  })

  it('a bad key, a bad value, a fourth pair, a key given twice: 400 invalid_parameter naming it', async () => {
    const cases: [string, RegExp][] = [
      ['metadata[bad%20key]=x', /metadata\[bad key\].*1 to 40 characters/],
      ['metadata[]=x', /metadata\[\].*1 to 40 characters/],
      [`metadata[${'k'.repeat(41)}]=x`, new RegExp(`metadata\\[${'k'.repeat(41)}\\].*1 to 40`)],
      ['metadata[a][b]=x', /metadata\[a\]\[b\]/],
      ['metadata[caf%C3%A9]=x', /metadata\[café\]/],
      [`metadata[note]=${'v'.repeat(501)}`, /metadata\[note\].*at most 500 characters/],
      ['metadata[note]=a%00b', /metadata\[note\].*U\+0000/],
      ['metadata[a]=1&metadata[b]=2&metadata[c]=3&metadata[d]=4', /metadata\[d\].*at most 3 keys/],
      ['metadata[a]=1&metadata[a]=2', /"metadata\[a\]" is given more than once/],
      ['metadata[a]=1&metadata%5Ba%5D=1', /"metadata\[a\]" is given more than once/],
      ['metadata=x', /metadata\[KEY\]=VALUE/],
      ['meta[a]=x', /Unknown query parameter "meta\[a\]"/],
      ['metadata[a=x', /Unknown query parameter "metadata\[a"/],
    ]
    for (const [search, message] of cases) assert.match(await refused(search), message, search)
    // at the limits: a 40-character key, a value of 500 characters, three pairs; characters are code
    // points, not UTF-16 units (300 dogs are 600 units)
    assert.deepEqual((await getPage(server, key, `metadata[${'k'.repeat(40)}]=${'%C3%A9'.repeat(500)}`)).data, [])
    assert.deepEqual((await getPage(server, key, `metadata[note]=${'%F0%9F%90%95'.repeat(300)}`)).data, [])
    assert.deepEqual((await getPage(server, key, 'metadata[a.b:c-d_E]=1&metadata[b]=2&metadata[c]=3')).data, [])
  })

  it('an order joins the filter when a PATCH gives it the pair, and leaves when a PATCH changes or removes it', async () => {
    const patch = async (id: string, body: object): Promise<void> => {
      const response = await fetch(`${server.origin}/v2/store/orders/${id}`, {
        method: 'PATCH',
        headers: { ...bearer(key), 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify(body),
      })
      assert.equal(response.status, 200, await response.text())
    }
    const filter: Filter = { metadata: [['campaign', 'spring']], status: ['pending', 'shipped', 'cancelled'] }
    const ids = async (f = filter): Promise<string[]> => (await list(f)).map((o) => o.id)
    assert.deepEqual(await ids(), [])
    await patch('5', { metadata: { campaign: 'spring' } })
    await patch('14', { metadata: { campaign: 'spring' } }) // cancelled: metadata changes in any state
    await patch('2', { metadata: { campaign: 'spring', channel: null } })
    assert.deepEqual(await ids(), ['2', '5', '14'])
    assert.deepEqual(await ids({ ...filter, metadata: [['campaign', 'spring'], ['channel', 'web']] }), ['14'], 'order 2 lost its channel')
    // A walk in progress: 5 leaves and 40 joins behind its cursor; the next page shows both changes.
    const first = await getPage(server, key, query(filter, { limit: '1' }))
    assert.deepEqual(first.data.map((o) => o.id), ['2'])
    await patch('5', { metadata: { campaign: 'summer' } })
    await patch('40', { metadata: { campaign: 'spring' } })
    const rest = await getPage(server, key, query(filter, { limit: '10', cursor: first.nextCursor! }))
    assert.deepEqual(rest.data.map((o) => o.id), ['14', '40'])
    assert.deepEqual(await ids({ metadata: [['campaign', 'summer']] }), ['5'])
    await patch('14', { metadata: { campaign: null } })
    assert.deepEqual(await ids(), ['2', '40'])
    // as they were
    await patch('2', { metadata: { campaign: null, channel: 'web' } })
    await patch('5', { metadata: { campaign: null } })
    await patch('40', { metadata: { campaign: null } })
    assert.deepEqual(await ids({ metadata: [['channel', 'web']], status: ['pending', 'shipped', 'cancelled'] }), expected(ORDERS, { metadata: [['channel', 'web']], status: ['pending', 'shipped', 'cancelled'] }))
  })

  it('`__proto__` and `constructor` are keys like any other', async () => {
    const body = '{"petId":7,"quantity":1,"metadata":{"__proto__":"p","constructor":"c","toString":"t"}}'
    const placed = await fetch(`${server.origin}/v2/store/orders`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body,
    })
    const text = await placed.text()
    assert.equal(placed.status, 201, text)
    const { id } = parseExact<{ id: string }>(text)
    const found = async (search: string): Promise<string[]> => (await getPage(server, key, search)).data.map((o) => o.id)
    assert.deepEqual(await found('metadata[__proto__]=p'), [id])
    assert.deepEqual(await found('metadata[constructor]=c&metadata[__proto__]=p&metadata[toString]=t'), [id])
    assert.deepEqual(await found('metadata[__proto__]=x'), [])
    assert.deepEqual(await found('metadata[hasOwnProperty]=p'), [])
    const [listed] = (await getPage(server, key, 'metadata[__proto__]=p')).data as Listed[]
    assert.deepEqual(Object.entries(listed!.metadata!), [['__proto__', 'p'], ['constructor', 'c'], ['toString', 't']])
    assert.equal(({} as { polluted?: unknown }).polluted, undefined)
    await sql(server, 'DELETE FROM orders WHERE id = ?', [BigInt(id)])
  })

  it('keys and values travel percent-encoded: spaces, `&`, `=`, `+`, brackets and any Unicode', async () => {
    const value = 'a b&c=d+e[f]🐕é'
    const response = await fetch(`${server.origin}/v2/store/orders`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify({ petId: 1, quantity: 1, metadata: { 'x:y.z-1_': value } }),
    })
    const { id } = parseExact<{ id: string }>(await response.text())
    assert.equal(response.status, 201)
    assert.deepEqual((await list({ metadata: [['x:y.z-1_', value]] })).map((o) => o.id), [id])
    assert.deepEqual((await list({ metadata: [['x:y.z-1_', value.slice(0, -1)]] })).map((o) => o.id), [])
    await sql(server, 'DELETE FROM orders WHERE id = ?', [BigInt(id)])
  })

  it('the document declares `metadata` as a deepObject query parameter of listOrders', async () => {
    const document = (await (await fetch(`${server.origin}/v2/openapi.json`)).json()) as {
      paths: Record<string, { get?: { parameters?: { name: string; in: string; style?: string; explode?: boolean; schema?: { maxProperties?: number } }[] } }>
    }
    const parameter = document.paths['/store/orders']?.get?.parameters?.find((p) => p.name === 'metadata')
    assert.ok(parameter !== undefined, 'listOrders has a metadata parameter')
    assert.equal(parameter.in, 'query')
    assert.equal(parameter.style, 'deepObject')
    assert.equal(parameter.explode, true)
    assert.equal(parameter.schema?.maxProperties, 3)
  })

  it('takes any value an order may hold (last: it adds an order the model above does not have): 500 characters beyond the BMP (6,000 bytes percent-encoded) fit in the URL', async () => {
    const long = '🐾'.repeat(500)
    await server.importOrders([order({ id: 9001n, metadata: { pawprints: long } })])
    const found = await list({ metadata: [['pawprints', long]] })
    assert.deepEqual(found.map((o) => [o.id, o.metadata?.pawprints]), [['9001', long]])
  })
})
