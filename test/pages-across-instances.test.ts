import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, it } from 'node:test'
import { bearer, createDatabase, forEachStore, type TestDatabaseHandle } from './support/harness.js'
import { BIN, spawnServer, type ServerProcess } from './support/server-process.js'
import { parseExact, type WireOrder } from './support/v2.js'

/** Orders per pet: pet 1 has orders 1…PER_PET, pet 2 the next PER_PET. */
const PER_PET = 240
const LIMIT = 2

function cli(database: TestDatabaseHandle, ...args: string[]): string {
  const result = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, DATABASE_URL: database.url }, encoding: 'utf8', timeout: 30_000 })
  assert.equal(result.status, 0, `petstore-orders ${args.join(' ')}: ${result.stderr}`)
  return result.stdout
}

async function cancel(server: ServerProcess, key: string, id: number): Promise<void> {
  const response = await fetch(`${server.origin}/v2/store/orders/${id}/cancel`, {
    method: 'POST',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    body: '{}',
  })
  assert.equal(response.status, 200, await response.text())
}

async function getJson<T>(server: ServerProcess, key: string, path: string): Promise<T> {
  const response = await fetch(`${server.origin}${path}`, { headers: bearer(key) })
  const text = await response.text()
  assert.equal(response.status, 200, text)
  return parseExact<T>(text)
}

// Two server processes on one database: two PostgreSQL instances, or two processes on one SQLite
// file. Behind a balancer a client may be sent to either for each request, so what one instance has
// answered must be in what the other answers next: an instance keeps no page for a client.
forEachStore('pages across instances', (kind) => {
  let database: TestDatabaseHandle
  let servers: [ServerProcess, ServerProcess]
  let key: string

  before(async () => {
    database = await createDatabase(kind)
    cli(database, 'migrate')
    const file = join(mkdtempSync(join(tmpdir(), 'petstore-orders-')), 'orders.ndjson')
    const orders = Array.from({ length: 2 * PER_PET }, (_, i) => ({ id: i + 1, petId: 1 + Math.floor(i / PER_PET), status: 'pending' }))
    writeFileSync(file, orders.map((order) => JSON.stringify(order)).join('\n'))
    cli(database, 'orders', 'import', file)
    key = cli(database, 'keys', 'create', '--name', 'walker').trim()
    servers = (await Promise.all([0, 1].map(() => spawnServer(database.url, { RATE_LIMIT_PER_KEY: '0' })))) as [ServerProcess, ServerProcess]
  })

  after(async () => {
    for (const server of servers ?? []) server.child.kill('SIGTERM')
    await Promise.all((servers ?? []).map((server) => server.exited))
    await database?.dispose()
  })

  it('a cancel answered by one instance is in the very next page another instance answers, at every page of a walk', async () => {
    // Each instance walks one pet's orders, a page from the previous one's cursor. While a page is
    // asked for, the other instance cancels the first order of the page after it; that page, asked
    // for once the cancel has been answered, must show the order cancelled.
    for (const [pet, walker, canceller] of [
      [1, servers[0], servers[1]],
      [2, servers[1], servers[0]],
    ] as const) {
      const firstId = (pet - 1) * PER_PET + 1
      let cursor: string | undefined
      for (let n = 0; n < PER_PET / LIMIT; n++) {
        const first = firstId + n * LIMIT
        const query = new URLSearchParams({ petId: String(pet), status: 'pending,shipped,cancelled', limit: String(LIMIT), ...(cursor === undefined ? {} : { cursor }) })
        const [page] = await Promise.all([
          getJson<{ data: WireOrder[]; nextCursor?: string }>(walker, key, `/v2/store/orders?${query}`),
          n + 1 < PER_PET / LIMIT ? cancel(canceller, key, first + LIMIT) : undefined,
        ])
        const where = `pet ${pet}, page ${n + 1}: order ${first}`
        assert.equal(page.data[0]?.id, String(first), where)
        if (n > 0) assert.equal(page.data[0]!.status, 'cancelled', `${where}, cancelled through the other instance, is shown ${page.data[0]!.status}`)
        cursor = page.nextCursor
      }
      assert.equal(cursor, undefined, `pet ${pet}: the walk ends`)
    }
  })

  it('an event committed through one instance is in the very next page of the feed another instance answers', async () => {
    type FeedPage = { data: { type: string; order: WireOrder }[]; nextCursor: string }
    const [reader, canceller] = servers
    // Caught up first; then, each round, the other instance cancels a page's worth of orders.
    let cursor = '0'
    for (let page = await getJson<FeedPage>(reader, key, `/v2/store/order-events?limit=${LIMIT}&after=${cursor}`); page.data.length > 0; ) {
      cursor = page.nextCursor
      page = await getJson<FeedPage>(reader, key, `/v2/store/order-events?limit=${LIMIT}&after=${cursor}`)
    }
    for (let round = 0; round < 20; round++) {
      // Even ids: the walks above cancelled odd ones (the first order of each page).
      const ids = [2 * round + 2, PER_PET + 2 * round + 2]
      for (const id of ids) await cancel(canceller, key, id)
      const page = await getJson<FeedPage>(reader, key, `/v2/store/order-events?limit=${LIMIT}&after=${cursor}`)
      assert.deepEqual(
        page.data.map((event) => [event.type, event.order.id]),
        ids.map((id) => ['order.cancelled', String(id)]),
        `round ${round}`,
      )
      cursor = page.nextCursor
    }
  })
})
