import assert from 'node:assert/strict'
import { it } from 'node:test'
import { ListCache } from '../src/http/list-cache.js'
import { bearer, expectError, sqliteReaderReleased, startTestServer } from './support/harness.js'

// Setting up a list's body can fail synchronously once its first page is read (the cache's
// collector, a compressor that cannot allocate its state); with valid input it cannot be made to,
// so the next ListCache.collector throws instead. Later failures, while the body streams, are the
// body's to handle (jsonArray's finally; test/list-streaming.test.ts).
const collector = ListCache.prototype.collector
let failNext = false
ListCache.prototype.collector = function (this: ListCache, ...args: Parameters<typeof collector>) {
  if (!failNext) return collector.apply(this, args)
  failNext = false
  throw new Error('simulated ENOSPC')
}

it('a list whose body cannot be set up after its first page was read answers 500 and returns the cursor [sqlite]', async () => {
  // SQLite only: the cursor is returned by the route, whichever store it came from.
  const server = await startTestServer('sqlite')
  const key = await server.createKey()
  await server.importOrders([{ id: 1n }, { id: 2n }, { id: 3n }])
  const list = (encoding: string): Promise<Response> =>
    fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': encoding } })

  failNext = true
  await expectError(await list('gzip'), 500, 'internal_error')
  assert.equal(failNext, false, 'the fault was injected')

  // A write past the failed list's snapshot, which a reader still holding it would keep in the WAL.
  assert.equal((await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })).status, 204)
  assert.equal(await sqliteReaderReleased(server)(), true, 'no reader still holds the failed list’s snapshot')

  const again = await list('gzip')
  assert.equal(again.status, 200)
  assert.equal(again.headers.get('content-encoding'), 'gzip')
  assert.deepEqual(((await again.json()) as { id: number }[]).map((o) => o.id), [2, 3]) // fetch decodes gzip
})
