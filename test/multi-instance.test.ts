import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import pg from 'pg'
import { bearer, createDatabase, forEachStore, type TestDatabaseHandle } from './support/harness.js'
import { cli as runCli } from './support/cli.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'

const KEY_CACHE_TTL_MS = 2000 // the documented revocation bound (the default)

/**
 * Runs the CLI on the database. Asynchronous on purpose: a spawnSync blocked this process's event
 * loop for seconds on a loaded machine, so sockets the servers closed meanwhile (keep-alive timeout)
 * were still in fetch's pool, and the next request on one failed with "other side closed".
 */
async function cli(database: TestDatabaseHandle, ...args: string[]): Promise<string> {
  const result = await runCli(args, { DATABASE_URL: database.url })
  assert.equal(result.code, 0, `petstore-orders ${args.join(' ')}: ${result.stderr}`)
  return result.stdout
}

/** The database's data version, read directly: it moves once per committed change to orders. */
async function dataVersion(database: TestDatabaseHandle): Promise<bigint> {
  const text = 'SELECT CAST(version AS TEXT) AS v FROM data_version'
  if (database.config.kind === 'sqlite') {
    const db = new Database(database.config.path, { readonly: true })
    try {
      return BigInt((db.prepare(text).get() as { v: string }).v)
    } finally {
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: database.url })
  await client.connect()
  try {
    return BigInt((await client.query<{ v: string }>(text)).rows[0]!.v)
  } finally {
    await client.end()
  }
}

forEachStore('several instances on one database', (kind) => {
  let database: TestDatabaseHandle
  let servers: ServerProcess[]

  before(async () => {
    database = await createDatabase(kind)
    await cli(database, 'migrate')
    servers = await Promise.all([0, 1].map(() => spawnServer(database.url, { RATE_LIMIT_PER_KEY: '0' })))
  })

  after(async () => {
    for (const server of servers ?? []) server.child.kill('SIGTERM')
    await Promise.all((servers ?? []).map((server) => server.exited))
    await database?.dispose()
  })

  it('accepts a key created by the CLI on both instances at once', async () => {
    const key = (await cli(database, 'keys', 'create', '--name', 'shared')).trim()
    const statuses = await Promise.all(servers.map((s) => fetch(`${s.origin}/v1/store/orders`, { headers: bearer(key) }).then((r) => r.status)))
    assert.deepEqual(statuses, [200, 200])
  })

  it('gives exactly one 204 per order when concurrent cancels of the same orders hit both instances', async () => {
    const key = (await cli(database, 'keys', 'create', '--name', 'cancels')).trim()
    const ids = Array.from({ length: 40 }, (_, i) => 1000 + i)
    const lines = ids.map((id) => JSON.stringify({ id, status: 'pending' })).join('\n')
    const file = join(mkdtempSync(join(tmpdir(), 'petstore-orders-')), 'orders.ndjson')
    writeFileSync(file, lines)
    await cli(database, 'orders', 'import', file)
    // 10 cancels of each order, alternating between the two instances, all in flight together.
    const attempts = ids.flatMap((id) => Array.from({ length: 10 }, (_, i) => ({ id, origin: servers[i % 2]!.origin })))
    const results = await Promise.all(
      attempts.map(async ({ id, origin }) => {
        const response = await fetch(`${origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) })
        return { id, status: response.status }
      }),
    )
    for (const id of ids) {
      const statuses = results.filter((r) => r.id === id).map((r) => r.status)
      assert.equal(statuses.filter((s) => s === 204).length, 1, `order ${id}: ${statuses}`)
      assert.equal(statuses.filter((s) => s === 404).length, 9, `order ${id}: ${statuses}`)
    }
  })

  it('v2: of 50 concurrent cancels of one order across both instances, exactly one changes it; all answer 200 with the same cancelledAt', async () => {
    const key = (await cli(database, 'keys', 'create', '--name', 'v2 cancels')).trim()
    const file = join(mkdtempSync(join(tmpdir(), 'petstore-orders-')), 'orders.ndjson')
    writeFileSync(file, [2000, 2001].map((id) => JSON.stringify({ id, petId: 5, status: 'pending' })).join('\n'))
    await cli(database, 'orders', 'import', file)
    const reasons = ['customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other']
    for (const id of [2000, 2001]) {
      const version = await dataVersion(database)
      // Order 2001: cancelled through v1 on one instance among the v2 cancels on both.
      const v1 = id === 2001 ? fetch(`${servers[0]!.origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) }) : undefined
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          fetch(`${servers[i % 2]!.origin}/v2/store/orders/${id}/cancel`, {
            method: 'POST',
            headers: { ...bearer(key), 'content-type': 'application/json' },
            body: JSON.stringify({ reason: reasons[i % reasons.length] }),
          }),
        ),
      )
      const bodies = await Promise.all(responses.map((response) => response.text()))
      assert.deepEqual(responses.map((response) => response.status), responses.map(() => 200), bodies.join('\n'))
      assert.equal(new Set(bodies).size, 1, `one order, one cancelledAt, one reason:\n${[...new Set(bodies)].join('\n')}`)
      const order = JSON.parse(bodies[0]!) as { status: string; cancelledAt: string; cancellationReason?: string }
      assert.equal(order.status, 'cancelled')
      assert.match(order.cancelledAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      if (v1 !== undefined) {
        const status = (await v1).status
        // The v1 DELETE is 204 exactly when it was the one to cancel: then no reason is recorded.
        assert.ok(status === 204 || status === 404, String(status))
        assert.equal(status === 204, order.cancellationReason === undefined, `v1 ${status}, reason ${order.cancellationReason}`)
      }
      assert.equal(await dataVersion(database), version + 1n, 'exactly one change')
      for (const server of servers) {
        const got = await fetch(`${server.origin}/v2/store/orders/${id}`, { headers: bearer(key) })
        assert.equal(await got.text(), bodies[0], 'getOrder on either instance shows the same order')
      }
    }
  })

  it(`refuses a key revoked by the CLI on both instances within ${KEY_CACHE_TTL_MS} ms`, async () => {
    const key = (await cli(database, 'keys', 'create', '--name', 'to revoke')).trim()
    for (const server of servers) assert.equal((await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })).status, 200)
    await cli(database, 'keys', 'revoke', key.slice(0, 12))
    const revokedAt = performance.now()
    // Each instance read the key before the revocation committed; its cache serves a key for at
    // most KEY_CACHE_TTL_MS from that read. So a request sent once that long has passed since the
    // revocation is refused, however slowly it is served (a lower bound of waiting, no speed asked).
    while (performance.now() - revokedAt <= KEY_CACHE_TTL_MS) await sleep(50)
    for (const server of servers) {
      const response = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
      await response.arrayBuffer()
      assert.equal(response.status, 401, `${server.origin}: served a key revoked ${Math.round(performance.now() - revokedAt)} ms ago`)
    }
  })
})
