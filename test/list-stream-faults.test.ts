import assert from 'node:assert/strict'
import { it } from 'node:test'
import Database from 'better-sqlite3'
import { GzipSegments } from '../src/http/gzip-segments.js'
import { bearer, expectError, startTestServer } from './support/harness.js'

// A body that fails to set up once the first page is read (a compressor that cannot allocate its
// state, say) cannot be caused with valid input: the next GzipSegments.encode throws instead.
const encode = GzipSegments.prototype.encode
let failNext = false
GzipSegments.prototype.encode = function (this: GzipSegments, ...args: Parameters<typeof encode>) {
  if (!failNext) return encode.apply(this, args)
  failNext = false
  throw new Error('simulated Z_MEM_ERROR')
}

it('a list that fails after its first page was read (here: its gzip encoder) answers 500 and returns the cursor [sqlite]', async () => {
  // SQLite only: the cursor is returned by the route, whichever store it came from.
  const server = await startTestServer('sqlite', { env: { LIST_CACHE_MAX_BYTES: '0' } })
  const key = await server.createKey()
  await server.importOrders([{ id: 1n }, { id: 2n }, { id: 3n }])
  const list = (encoding: string): Promise<Response> =>
    fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': encoding } })

  failNext = true
  await expectError(await list('gzip'), 500, 'internal_error')
  assert.equal(failNext, false, 'the fault was injected')

  // A checkpoint can reset the WAL only when no reader holds a snapshot older than the last write.
  assert.equal((await fetch(`${server.origin}/v1/store/orders/1`, { method: 'DELETE', headers: bearer(key) })).status, 204)
  const other = new Database((server.database.config as { path: string }).path, { timeout: 0 })
  try {
    const [checkpoint] = other.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[]
    assert.equal(checkpoint!.busy, 0, 'no reader still holds the failed list’s snapshot')
  } finally {
    other.close()
  }

  const again = await list('gzip')
  assert.equal(again.status, 200)
  assert.equal(again.headers.get('content-encoding'), 'gzip')
  assert.deepEqual(((await again.json()) as { id: number }[]).map((o) => o.id), [2, 3]) // fetch decodes gzip
})
