import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { after, describe, it } from 'node:test'
import { generateApiKey, SCOPES } from '../src/domain/api-keys.js'
import type { OrderStatus } from '../src/domain/orders.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { bearer, createDatabase, forEachStore, idsInBody, order, records, type TestDatabaseHandle } from './support/harness.js'
import { BIN, spawnServer, type ServerProcess } from './support/server-process.js'

async function prepare(database: TestDatabaseHandle, orders: number, status: OrderStatus = 'pending'): Promise<{ store: Store; key: string }> {
  const store = await openStore(database.config)
  await store.migrate()
  await store.orders.import(records(Array.from({ length: orders }, (_, i) => order({ id: BigInt(i + 1), status }))))
  const key = generateApiKey()
  await store.apiKeys.create({ name: 'process test', hash: key.hash, displayPrefix: key.displayPrefix, scopes: [...SCOPES], expiresAt: null })
  return { store, key: key.secret }
}

async function openIds(store: Store): Promise<Set<string>> {
  const ids = new Set<string>()
  for await (const page of store.orders.streamJson()) for (const id of idsInBody(page.toString())) ids.add(id)
  return ids
}

/**
 * 50 clients send `write(id)` (a cancel, a ship, …) for ids 1…3000 until 300 of them were answered
 * `expected`, then the server is SIGKILLed. Returns each acknowledged id with the body it was answered with. A
 * request the dying server never answered was never acknowledged; any other answer fails the test.
 */
async function writeStormThenKill(
  server: ServerProcess,
  write: (id: number) => Promise<Response>,
  expected: number,
): Promise<Map<string, string>> {
  const acknowledged = new Map<string, string>()
  let next = 1
  let killed = false
  const worker = async () => {
    while (!killed && next <= 3000) {
      const id = next++
      let response: Response
      let body: string
      try {
        response = await write(id)
        body = await response.text()
      } catch {
        return // the connection died with the server: this write was never acknowledged
      }
      assert.equal(response.status, expected, `${id}: ${body}`)
      acknowledged.set(String(id), body)
    }
  }
  const workers = Promise.all(Array.from({ length: 50 }, worker))
  const enough = (async () => {
    while (acknowledged.size < 300 && !killed) await new Promise((resolve) => setTimeout(resolve, 5))
  })()
  try {
    await Promise.race([enough, workers]) // a wrong answer fails the test here, not after a timeout
  } finally {
    server.child.kill('SIGKILL')
    killed = true
  }
  await workers
  assert.equal((await server.exited).signal, 'SIGKILL')
  return acknowledged
}

forEachStore('the server process', (kind) => {
  const cleanups: (() => Promise<void>)[] = []
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  })

  it('loses no acknowledged cancel when SIGKILLed during a storm of concurrent cancels', async () => {
    const database = await createDatabase(kind)
    const { store, key } = await prepare(database, 3000)
    cleanups.push(async () => {
      await store.close()
      await database.dispose()
    })
    const server = await spawnServer(database.url, { RATE_LIMIT_PER_KEY: '0' })
    const answered = await writeStormThenKill(
      server,
      (id) => fetch(`${server.origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) }),
      204,
    )
    const acknowledged = [...answered.keys()]

    // Restart on the same database: every 204 is still a cancelled order.
    const restarted = await spawnServer(database.url)
    cleanups.push(async () => {
      restarted.child.kill('SIGTERM')
      await restarted.exited
    })
    const stillOpen = await openIds(store)
    const lost = acknowledged.filter((id) => stillOpen.has(id))
    assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.length} acknowledged cancels were lost`)
    for (const id of acknowledged.slice(0, 20)) {
      const again = await fetch(`${restarted.origin}/v1/store/orders/${id}`, { method: 'DELETE', headers: bearer(key) })
      assert.equal(again.status, 404)
    }
  })

  const reasons = ['customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other']
  const v2Writes = [
    { action: 'cancel', from: 'pending', kept: ['cancelledAt', 'cancellationReason'], what: 'time and reason', body: (id: number) => ({ reason: reasons[id % reasons.length] }) },
    { action: 'ship', from: 'pending', kept: ['shippedAt'], what: 'shippedAt', body: () => undefined },
    { action: 'complete', from: 'shipped', kept: ['completedAt'], what: 'completedAt', body: () => undefined },
  ] as const
  for (const { action, from, kept, what, body: bodyOf } of v2Writes) {
    it(`v2: loses no ${action} answered 200 when SIGKILLed during a storm; each keeps the ${what} it was answered with`, async () => {
      const database = await createDatabase(kind)
      const { store, key } = await prepare(database, 3000, from)
      cleanups.push(async () => {
        await store.close()
        await database.dispose()
      })
      const server = await spawnServer(database.url, { RATE_LIMIT_PER_KEY: '0' })
      const acknowledged = await writeStormThenKill( // id → the body of its 200
        server,
        (id) => {
          const body = bodyOf(id)
          return fetch(`${server.origin}/v2/store/orders/${id}/${action}`, {
            method: 'POST',
            headers: body === undefined ? bearer(key) : { ...bearer(key), 'content-type': 'application/json' },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          })
        },
        200,
      )

      // Restart on the same database: every 200 is a change made, exactly as it was answered.
      const restarted = await spawnServer(database.url)
      cleanups.push(async () => {
        restarted.child.kill('SIGTERM')
        await restarted.exited
      })
      const lost: string[] = []
      for (const [id, body] of acknowledged) {
        const answered = JSON.parse(body) as Record<string, unknown>
        const stored = (await store.orders.find(BigInt(id))) as Record<string, unknown> | undefined
        if (stored?.[kept[0]] === null || stored?.[kept[0]] === undefined) lost.push(id)
        else assert.deepEqual(kept.map((field) => stored[field]), kept.map((field) => answered[field]), `order ${id}`)
      }
      assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.size} ${action}s answered 200 were lost`)
      for (const [id, body] of [...acknowledged].slice(0, 20)) {
        const again = await fetch(`${restarted.origin}/v2/store/orders/${id}/${action}`, { method: 'POST', headers: bearer(key) })
        assert.equal(again.status, 200)
        assert.equal(await again.text(), body, 'a retry after the restart answers the same order')
      }
    })
  }

  it('drains in-flight requests on SIGTERM (no 5xx) and exits 0', async () => {
    const database = await createDatabase(kind)
    const { store, key } = await prepare(database, 2000)
    cleanups.push(async () => {
      await store.close()
      await database.dispose()
    })
    const server = await spawnServer(database.url, { RATE_LIMIT_PER_KEY: '0' })
    const statuses: number[] = []
    let stop = false
    let next = 1
    const worker = async (i: number) => {
      while (!stop) {
        try {
          const response =
            i % 2 === 0
              ? await fetch(`${server.origin}/v1/store/orders`, { headers: { ...bearer(key), 'accept-encoding': 'identity' } })
              : await fetch(`${server.origin}/v1/store/orders/${next++}`, { method: 'DELETE', headers: bearer(key) })
          await response.arrayBuffer()
          statuses.push(response.status)
        } catch {
          return // refused: the server no longer accepts connections
        }
      }
    }
    const workers = Array.from({ length: 20 }, (_, i) => worker(i))
    while (statuses.length < 200) await new Promise((resolve) => setTimeout(resolve, 5))
    server.child.kill('SIGTERM')
    const exit = await server.exited
    stop = true
    await Promise.all(workers)
    assert.deepEqual(exit, { code: 0, signal: null }, server.output())
    assert.ok(statuses.length >= 200)
    assert.deepEqual(statuses.filter((s) => s >= 500), [], 'no request got a 5xx while draining')
  })

  it('exits 0 on SIGINT too', async () => {
    const database = await createDatabase(kind)
    cleanups.push(() => database.dispose())
    const server = await spawnServer(database.url)
    server.child.kill('SIGINT')
    assert.deepEqual(await server.exited, { code: 0, signal: null })
  })
})

describe('configuration is validated at start', () => {
  for (const [variable, value] of [
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['DATABASE_URL', 'mysql://localhost/x'],
    ['KEY_CACHE_TTL_MS', '-1'],
    ['PETS_SUNSET_AT', 'next year'],
    ['PUBLIC_BASE_URL', 'https://api.example.test/v2'],
    ['RATE_LIMIT_PER_KEY', '1.5'],
    ['REDIS_URL', 'http://localhost'],
    ['LOG_LEVEL', 'loud'],
  ] as const) {
    it(`stops with a message naming ${variable} when it is "${value}"`, () => {
      const result = spawnSync(process.execPath, [BIN, 'serve'], { env: { ...process.env, [variable]: value }, encoding: 'utf8', timeout: 20_000 })
      assert.notEqual(result.status, 0)
      assert.equal(result.stdout, '')
      const lines = result.stderr.trim().split('\n')
      assert.equal(lines.length, 1, result.stderr)
      assert.match(lines[0]!, new RegExp(variable))
    })
  }
})
