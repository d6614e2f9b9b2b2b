import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import fastJson from 'fast-json-stringify'
import Type from 'typebox'
import { type OrderFilters, type OrderPageQuery } from '../src/domain/order-pages.js'
import { CANCELLATION_REASONS, ORDER_STATUSES, type OrderRecord } from '../src/domain/orders.js'
import { OrderV2, toApiOrderV2 } from '../src/schemas/order-v2.js'
import { forEachStore, order, startTestServer, type TestServer } from './support/harness.js'
import { pageRecords } from './support/order-pages.js'
import { orderV2Json } from '../src/store/order-json.js'

const COUNT = 3000

/** A small deterministic generator (mulberry32): the same orders on every run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function randomOrders(): OrderRecord[] {
  const next = random(2026)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!
  const ids = new Set<bigint>()
  while (ids.size < COUNT) {
    // Small ids, ids just past 2^53 and ids near the int64 limits, in random order.
    const scale = pick([1n, 2n ** 53n, 2n ** 62n])
    ids.add((next() < 0.1 ? -1n : 1n) * (scale + BigInt(Math.floor(next() * 1e9))))
  }
  return [...ids].map((id) => {
    const status = pick(ORDER_STATUSES)
    const record = order({
      id,
      petId: next() < 0.2 ? null : BigInt(Math.floor(next() * 50)) * (next() < 0.5 ? 1n : 2n ** 55n),
      quantity: next() < 0.2 ? null : 1 + Math.floor(next() * 2_000_000_000),
      shipDate: next() < 0.2 ? null : new Date(Date.UTC(2026, 0, 1) + Math.floor(next() * 365 * 86_400_000)).toISOString(),
      complete: status === 'shipped' && next() < 0.5,
      status,
    })
    if (status === 'cancelled') {
      record.cancelledAt = new Date(Date.UTC(2026, 5, 1) + Math.floor(next() * 1e10)).toISOString()
      if (next() < 0.5) record.cancellationReason = pick(CANCELLATION_REASONS)
    }
    if (next() < 0.3) record.metadata = randomMetadata(next)
    return record
  })
}

/**
 * Metadata whose keys and values a JSON writer must take care with: keys JavaScript orders first
 * (integer-like), `__proto__` and `constructor`; values with quotes, backslashes, control and
 * line-separator characters, and characters beyond the BMP.
 */
function randomMetadata(next: () => number): Record<string, string> {
  const keys = ['customer', '10', '2', '__proto__', 'constructor', 'cart.id', 'note:1', 'a-b_c']
  const values = ['c-1042', 'say "hi"', 'back\\slash', 'tab\tand\nline', '\u2028\u2029', 'ü €', '🐶🐱', '', '\u0001\u001f']
  const entries: [string, string][] = []
  for (const key of keys) if (next() < 0.4) entries.push([key, values[Math.floor(next() * values.length)]!])
  return Object.fromEntries(entries.length === 0 ? [['customer', 'c-1']] : entries)
}

/** Every filter path: the primary key's (pending and shipped, nothing else) and the branches', with and without a probe. */
const FILTERS: OrderFilters[] = [
  { statuses: ['pending', 'shipped'] },
  { statuses: [...ORDER_STATUSES] },
  { statuses: ['cancelled'] },
  { statuses: ['shipped'], complete: true },
  { statuses: ['pending', 'shipped', 'cancelled'], petId: 7n },
  { statuses: ['pending', 'shipped'], shipDateFrom: '2026-06-01T00:00:00.000Z', shipDateTo: '2026-07-01T00:00:00.000Z' },
  { statuses: ['cancelled'], shipDateFrom: '2026-06-01T00:00:00.000Z', shipDateTo: '2026-06-02T00:00:00.000Z' },
  { statuses: ['pending'], shipDateTo: '2026-01-01T00:00:00.000Z' }, // empty
]

forEachStore('v2 pages as JSON written by the database', (kind) => {
  let server: TestServer
  // The list route's data array is an array of OrderV2: fast-json-stringify is what Fastify compiles it with.
  const serialize = fastJson(Type.Array(OrderV2) as object, {}) as (orders: unknown[]) => string

  before(async () => {
    server = await startTestServer(kind)
    const orders = randomOrders()
    await server.importOrders(orders)
    // Shipped and completed through the store: shippedAt, and completedAt on half of them. Imported
    // shipped orders have neither, unless completed since (completedAt without shippedAt).
    const pending = orders.filter((o) => o.status === 'pending').slice(0, 200)
    for (const [i, { id }] of pending.entries()) {
      assert.equal((await server.store.orders.ship(id)).outcome, 'shipped')
      if (i % 2 === 0) assert.equal((await server.store.orders.complete(id)).outcome, 'completed')
    }
    for (const { id } of orders.filter((o) => o.status === 'shipped' && !o.complete).slice(0, 50)) {
      assert.equal((await server.store.orders.complete(id)).outcome, 'completed')
    }
    // Changed through the store: versions above 1, metadata set, replaced and removed.
    for (const [i, { id }] of orders.slice(0, 100).entries()) {
      const metadata = new Map<string, string | null>([['customer', i % 3 === 0 ? null : `c-${i}`], ['__proto__', 'p']])
      assert.equal((await server.store.orders.update({ id, patch: { metadata } })).outcome, 'updated')
    }
  })

  it("equals the OrderV2 serializer's output for the same page, with its last id and whether more follow", async () => {
    for (const filters of FILTERS) {
      for (const limit of [1, 7, 100, 1000]) {
        let after: bigint | undefined
        for (let pages = 0; ; pages++) {
          const query: OrderPageQuery = { filters, after, limit }
          const records = await pageRecords(server.database, { ...query, limit: limit + 1 })
          const page = await server.store.orders.pageJson(query)
          const what = `${JSON.stringify({ ...filters, petId: filters.petId?.toString() })}, limit ${limit}, after ${after}`
          assert.equal(page.json.toString(), serialize(records.slice(0, limit).map(toApiOrderV2)), what)
          assert.equal(page.more, records.length > limit, what)
          assert.equal(page.lastId, records.slice(0, limit).at(-1)?.id, what)
          if (!page.more || pages === 5) break
          after = page.lastId
        }
      }
    }
  })

  it('writes every field the serializer does: nulls omitted, reasons with and without, shipped and completed times, ids beyond 2^53', async () => {
    const all = await server.store.orders.pageJson({ filters: { statuses: [...ORDER_STATUSES] }, limit: 1000 })
    const text = all.json.toString()
    for (const field of ['"petId"', '"quantity"', '"shipDate"', '"shippedAt"', '"completedAt"', '"cancelledAt"', '"cancellationReason"', '"metadata"', '"__proto__"', '"version":2']) {
      assert.ok(text.includes(field), field)
    }
    assert.match(text, /"status":"shipped","version":\d+(,"petId":-?\d+)?(,"quantity":\d+)?(,"shipDate":"[^"]+")?,"shippedAt":"[^"]+","completedAt":"[^"]+"}/)
    assert.match(text, /"complete":true,"status":"shipped","version":\d+(,"petId":-?\d+)?(,"quantity":\d+)?(,"shipDate":"[^"]+")?,"completedAt":"[^"]+"}/)
    assert.match(text, /"status":"cancelled","version":\d+(,"petId":\d+)?(,"quantity":\d+)?(,"shipDate":"[^"]+")?,"cancelledAt":"[^"]+"}/)
    assert.match(text, /\{"id":-?\d{17,},"complete":(true|false),"status":"[a-z]+","version":\d+/)
    const shippedAt = /"status":"shipped","version":\d+(,"petId":\d+)?(,"quantity":\d+)?(,"shipDate":"[^"]+")?,"shippedAt":"[^"]+"/
    assert.match(text, new RegExp(`"complete":false,${shippedAt.source}}`), 'shipped, not complete')
    assert.match(text, new RegExp(`"complete":true,${shippedAt.source},"completedAt":"[^"]+"}`), 'shipped and completed')
    assert.match(text, /"complete":true,"status":"shipped","version":\d+(,"petId":\d+)?(,"quantity":\d+)?(,"shipDate":"[^"]+")?,"completedAt":"[^"]+"}/, 'imported shipped, completed')
    assert.match(text, /"complete":true,"status":"shipped","version":\d+(,"petId":\d+)?(,"quantity":\d+)?(,"shipDate":"[^"]+")?}/, 'imported complete')
  })

  it("orderV2Json (the JSON of an order just written, made in JavaScript) equals the serializer's for every order", async () => {
    const records = await pageRecords(server.database, { filters: { statuses: [...ORDER_STATUSES] }, limit: COUNT })
    assert.equal(records.length, COUNT)
    assert.ok(records.some((record) => record.shippedAt !== null) && records.some((record) => record.completedAt !== null))
    assert.ok(records.some((record) => record.metadata !== null) && records.some((record) => record.version > 1))
    for (const record of records) assert.equal(`[${orderV2Json(record)}]`, serialize([toApiOrderV2(record)]), String(record.id))
  })
})
