import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import { createKey } from '../src/keys/create-key.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { bearer, createDatabase, forEachStore, order, records, within, type TestDatabaseHandle } from './support/harness.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'
import Database from 'better-sqlite3'
import pg from 'pg'

const SHUTDOWN_TIMEOUT_MS = 20_000

/** Makes the events up to `position` look as if they had occurred at `when`. */
async function backdate(database: TestDatabaseHandle, position: number, when: Date): Promise<void> {
  const text = 'UPDATE order_events SET occurred_at = ? WHERE position <= ?'
  if (database.config.kind === 'sqlite') {
    const db = new Database(database.config.path)
    try {
      db.prepare(text).run(when.toISOString(), position)
    } finally {
      db.close()
    }
    return
  }
  const client = new pg.Client({ connectionString: database.url })
  await client.connect()
  try {
    await client.query(text.replace('?', '$1').replace('?', '$2'), [when, position])
  } finally {
    await client.end()
  }
}

// `petstore-orders serve` as a real process: the pruner runs in it, and SIGTERM answers held long polls.
forEachStore('order event feed in a serving process', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let key: string
  const servers: ServerProcess[] = []

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    key = (await createKey(store.apiKeys, { name: 'feed' })).secret
  })
  after(async () => {
    for (const server of servers) if (server.child.exitCode === null) server.child.kill('SIGKILL')
    await store?.close()
    await database?.dispose()
  })

  it('prunes the events older than EVENTS_RETENTION_DAYS at start: a cursor before them is then 410', async () => {
    await store.orders.import(records(Array.from({ length: 5 }, (_, i) => order({ id: BigInt(i + 1) }))))
    // Events 1–3 occurred two days ago; 4 and 5 now.
    await backdate(database, 3, new Date(Date.now() - 2 * 86_400_000))
    const server = await spawnServer(database.url, { EVENTS_RETENTION_DAYS: '1' })
    servers.push(server)
    const statusAfter0 = async (): Promise<number> => {
      const response = await fetch(`${server.origin}/v2/store/order-events?after=0`, { headers: bearer(key) })
      await response.arrayBuffer()
      return response.status
    }
    await within(15_000, 'the first pass has pruned', async () => (await statusAfter0()) === 410, 50)
    const response = await fetch(`${server.origin}/v2/store/order-events`, { headers: bearer(key) })
    const body = (await response.json()) as { data: { id: string }[]; nextCursor: string }
    assert.deepEqual(body.data.map((event) => event.id), ['4', '5'])
    assert.equal(body.nextCursor, '5')
    server.child.kill('SIGTERM')
    assert.deepEqual(await server.exited, { code: 0, signal: null })
    assert.doesNotMatch(server.output(), /pruning order events failed/)
  })

  it('answers held long polls at once on SIGTERM, and exits well within the shutdown timeout', async () => {
    const server = await spawnServer(database.url, { SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) })
    servers.push(server)
    const held = Array.from({ length: 4 }, () =>
      fetch(`${server.origin}/v2/store/order-events?after=5&wait=30`, { headers: bearer(key) }).then(async (response) => ({
        status: response.status,
        text: await response.text(),
        at: performance.now(),
      })),
    )
    await within(15_000, 'the requests are held', async () => {
      const metrics = await (await fetch(`${server.origin}/metrics`)).text()
      return /^order_events_waiting 4$/m.test(metrics)
    })
    const signalled = performance.now()
    server.child.kill('SIGTERM')
    // Held requests left to their 30 s wait would outlast the shutdown timeout (20 s) and be cut
    // off; answered at once, they let the process exit well before it: half of it is the bound.
    for (const answer of await Promise.all(held)) {
      assert.equal(answer.status, 200)
      assert.equal(answer.text, '{"data":[],"nextCursor":"5"}')
      assert.ok(answer.at - signalled < SHUTDOWN_TIMEOUT_MS / 2, `answered ${Math.round(answer.at - signalled)} ms after SIGTERM`)
    }
    assert.deepEqual(await server.exited, { code: 0, signal: null })
    const exitedAfter = performance.now() - signalled
    assert.ok(exitedAfter < SHUTDOWN_TIMEOUT_MS / 2, `exited ${Math.round(exitedAfter)} ms after SIGTERM (shutdown timeout ${SHUTDOWN_TIMEOUT_MS} ms)`)
  })
})
