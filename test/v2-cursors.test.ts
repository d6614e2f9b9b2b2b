import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import fc from 'fast-check'
import { bearer, expectError, forEachStore, order, startTestServer, type TestServer } from './support/harness.js'
import { getPage, sql, walk } from './support/v2.js'
import type { OrderRecord, OrderStatus } from '../src/domain/orders.js'

forEachStore('v2 list cursors', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    await server.importOrders(Array.from({ length: 30 }, (_, i) => ({ id: BigInt(i + 1), petId: BigInt(i % 3), status: 'pending' as const })))
  })

  async function refused(query: string): Promise<string> {
    const response = await fetch(`${server.origin}/v2/store/orders?${query}`, { headers: bearer(key) })
    return (await expectError(response, 400, 'invalid_cursor')).message as string
  }

  it('refuses an altered cursor, one of another length, and one not from this API', async () => {
    const { nextCursor } = await getPage(server, key, 'limit=5')
    assert.ok(nextCursor !== undefined)
    // every single character changed, one at a time
    for (let i = 0; i < nextCursor.length; i++) {
      const swapped = nextCursor[i] === 'A' ? 'B' : 'A'
      await refused(`limit=5&cursor=${nextCursor.slice(0, i)}${swapped}${nextCursor.slice(i + 1)}`)
    }
    await refused(`limit=5&cursor=${nextCursor}A`)
    await refused(`limit=5&cursor=${nextCursor.slice(0, -1)}`)
    // a well-formed cursor for another position, forged without the secret
    const bytes = Buffer.from(nextCursor, 'base64url')
    bytes.writeBigInt64BE(20n, 17)
    await refused(`limit=5&cursor=${bytes.toString('base64url')}`)
    await refused(`limit=5&cursor=${Buffer.from('{"after":5}').toString('base64url')}`)
    // Characters no cursor has, padding, or none at all: not a cursor of this API either.
    for (const cursor of [`${nextCursor}=`, `${nextCursor.slice(0, 10)}%2B${nextCursor.slice(11)}`, '', 'not%20base64!', '%C3%A9'.repeat(40)]) {
      await refused(`limit=5&cursor=${cursor}`)
    }
  })

  it('refuses a cursor used with other filters, and names them', async () => {
    const { nextCursor } = await getPage(server, key, 'limit=5&petId=1')
    assert.ok(nextCursor !== undefined)
    for (const other of ['', 'petId=2', 'petId=1&status=pending', 'petId=1&complete=false', 'petId=1&shipDateFrom=2026-01-01T00:00:00Z']) {
      const message = await refused(`limit=5&${other}&cursor=${nextCursor}`)
      assert.match(message, /other filters/)
    }
    // the same filters, spelled differently, are the same filters
    const same = await getPage(server, key, `limit=2&petId=01&status=shipped,pending&cursor=${nextCursor}`)
    assert.deepEqual(same.data.map((o) => o.id), ['17', '20'])
  })

  it('a cursor stays valid after a restart and on a second instance (the secret is in the database)', async () => {
    const first = await getPage(server, key, 'limit=10')
    const expected = (await getPage(server, key, `limit=10&cursor=${first.nextCursor}`)).data.map((o) => o.id)
    const second = await startTestServer(kind, { database: server.database })
    const other = await second.createKey()
    assert.deepEqual((await getPage(second, other, `limit=10&cursor=${first.nextCursor}`)).data.map((o) => o.id), expected)
    await second.close()
    const restarted = await startTestServer(kind, { database: server.database })
    assert.deepEqual((await getPage(restarted, key, `limit=10&cursor=${first.nextCursor}`)).data.map((o) => o.id), expected)
    await restarted.close()
  })

  it('a cursor of another database is refused (each database has its own secret)', async () => {
    const elsewhere = await startTestServer(kind)
    const otherKey = await elsewhere.createKey()
    await elsewhere.importOrders(Array.from({ length: 3 }, (_, i) => ({ id: BigInt(i + 1) })))
    const { nextCursor } = await getPage(elsewhere, otherKey, 'limit=1')
    await refused(`limit=1&cursor=${nextCursor}`)
  })

  it('a walk while orders are cancelled, shipped and imported returns none twice and skips none that matched throughout', async () => {
    const walker = await startTestServer(kind)
    const walkerKey = await walker.createKey()
    const initial = Array.from({ length: 200 }, (_, i) => order({ id: BigInt(10 * (i + 1)), petId: BigInt(i % 5), status: i % 7 === 0 ? 'shipped' : 'pending' }))
    await walker.importOrders(initial)
    const touched = new Set<string>() // changed during the walk: may or may not be seen
    const seen: string[] = []
    let cursor: string | undefined
    let round = 0
    for (;;) {
      const page = await getPage(walker, walkerKey, `status=pending&limit=${3 + (round % 9)}${cursor === undefined ? '' : `&cursor=${cursor}`}`)
      seen.push(...page.data.map((o) => o.id))
      for (const o of page.data) assert.equal(o.status, 'pending')
      if (page.nextCursor === undefined) break
      cursor = page.nextCursor
      round++
      // behind and ahead of the cursor: cancel one, ship one, import new ones
      // Initial orders (multiples of 10) change status; imported ones (5 mod 10) stay pending.
      const last = BigInt(page.data.at(-1)!.id)
      const base = last - (last % 10n)
      for (const id of [base - 10n * BigInt(round % 4), base + 10n * BigInt(1 + (round % 5))]) {
        touched.add(String(id))
        if (round % 2 === 0) await walker.store.orders.cancel(id, null)
        else await walker.store.orders.ship(id)
      }
      const imported = [base - 5n, base + 5n, base + 15n]
      for (const id of imported) touched.add(String(id))
      await walker.importOrders(imported.map((id) => order({ id, status: 'pending' })))
    }
    assert.equal(new Set(seen).size, seen.length, 'an order came twice')
    const throughout = initial.filter((o) => o.status === 'pending' && !touched.has(String(o.id))).map((o) => String(o.id))
    const missing = throughout.filter((id) => !seen.includes(id))
    assert.deepEqual(missing, [], 'orders that matched throughout were skipped')
    assert.ok(round > 20, `${round} pages`)
    const ascending = seen.map(BigInt)
    for (let i = 1; i < ascending.length; i++) assert.ok(ascending[i]! > ascending[i - 1]!, 'ascending ids')
  })

  it('every walk, at random limits, equals filtering a model of the orders (property)', async () => {
    const model = await startTestServer(kind)
    const modelKey = await model.createKey()
    const statusArb = fc.constantFrom<OrderStatus>('pending', 'shipped', 'cancelled')
    const dates = ['2026-11-01T00:00:00.000Z', '2026-11-01T00:00:00.001Z', '2026-11-15T12:00:00.000Z', '2026-12-01T00:00:00.000Z']
    const orderArb = fc
      .record({
        id: fc.oneof(fc.bigInt({ min: 1n, max: 60n }), fc.constantFrom(2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n)),
        petId: fc.option(fc.constantFrom(1n, 2n, 2n ** 63n - 2n), { nil: null }),
        shipDate: fc.option(fc.constantFrom(...dates), { nil: null }),
        status: statusArb,
        complete: fc.boolean(),
      })
      .map((o): OrderRecord => order({ ...o, quantity: 1, complete: o.status === 'shipped' && o.complete }))
    const filterArb = fc.record(
      {
        status: fc.uniqueArray(statusArb, { minLength: 1, maxLength: 3 }),
        petId: fc.constantFrom(1n, 2n, 3n, 2n ** 63n - 2n),
        complete: fc.boolean(),
        shipDateFrom: fc.constantFrom(...dates),
        shipDateTo: fc.constantFrom(...dates, '2027-01-01T00:00:00.000Z'),
      },
      { requiredKeys: [] },
    )
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(orderArb, { maxLength: 40, selector: (o) => o.id }),
        filterArb,
        fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 8 }),
        async (orders, filter, limits) => {
          if (filter.shipDateFrom !== undefined && filter.shipDateTo !== undefined && filter.shipDateFrom >= filter.shipDateTo) return
          await sql(model, 'DELETE FROM orders')
          await model.importOrders(orders)
          const statuses = filter.status ?? ['pending', 'shipped']
          const expected = orders
            .filter(
              (o) =>
                statuses.includes(o.status) &&
                (filter.petId === undefined || o.petId === filter.petId) &&
                (filter.complete === undefined || o.complete === filter.complete) &&
                (filter.shipDateFrom === undefined || (o.shipDate !== null && o.shipDate >= filter.shipDateFrom)) &&
                (filter.shipDateTo === undefined || (o.shipDate !== null && o.shipDate < filter.shipDateTo)),
            )
            .map((o) => o.id)
            .sort((a, b) => (a < b ? -1 : 1))
            .map(String)
          const params: Record<string, string> = {}
          if (filter.status !== undefined) params.status = filter.status.join(',')
          if (filter.petId !== undefined) params.petId = String(filter.petId)
          if (filter.complete !== undefined) params.complete = String(filter.complete)
          if (filter.shipDateFrom !== undefined) params.shipDateFrom = filter.shipDateFrom
          if (filter.shipDateTo !== undefined) params.shipDateTo = filter.shipDateTo
          let i = 0
          const { ids } = await walk(model, modelKey, params, () => limits[i++ % limits.length]!)
          assert.deepEqual(ids, expected)
        },
      ),
      { numRuns: kind === 'sqlite' ? 60 : 30 },
    )
  })
})
