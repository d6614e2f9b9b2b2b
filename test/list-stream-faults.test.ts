import assert from 'node:assert/strict'
import { it } from 'node:test'
import { ListFill } from '../src/http/list-cache.js'
import { bearer, expectError, sqliteReaderReleased, startTestServer } from './support/harness.js'

// Writing a list's fill can fail once its first page was read (a full disk); with a valid temporary
// directory it cannot be made to, so the next ListFill.append throws instead. The fill then fails
// before a byte is written: its followers answer an Error, and the fill returns the cursor.
const append = ListFill.prototype.append
let failNext = false
ListFill.prototype.append = function (this: ListFill, ...args: Parameters<typeof append>) {
  if (!failNext) return append.apply(this, args)
  failNext = false
  return Promise.reject(new Error('simulated ENOSPC'))
}

it('a list whose fill fails after its first page was read answers 500 and returns the cursor [sqlite]', async () => {
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
