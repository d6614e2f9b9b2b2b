import assert from 'node:assert/strict'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { describe, it } from 'node:test'
import { loadConfig } from '../src/config.js'
import { IdempotencyKeyPruner } from '../src/pruning/idempotency-key-pruner.js'
import { forEachStore, startTestServer } from './support/harness.js'
import { place } from './support/place.js'
import { sql } from './support/v2.js'

const HOUR_MS = 3_600_000

/** Lets the promise callbacks of a pass run (each batch awaits the store, then a turn of the loop). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await nextTurn()
}

function recorder() {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = []
  const log = {
    info: (fields: object, message: string) => void lines.push({ level: 'info', fields: fields as Record<string, unknown>, message }),
    warn: (fields: object, message: string) => void lines.push({ level: 'warn', fields: fields as Record<string, unknown>, message }),
  }
  return { log, lines }
}

describe('the Idempotency-Key pruner', () => {
  it('deletes what expired before now, at start and every minute, in batches of 1000, until stopped', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const calls: { now: Date; limit: number }[] = []
    const counts = [1000, 1000, 7]
    const orders = { pruneIdempotencyKeys: async (now: Date, limit: number) => (calls.push({ now, limit }), counts.shift() ?? 0) }
    const { log, lines } = recorder()
    let clock = Date.UTC(2026, 10, 27, 9)
    const pruner = new IdempotencyKeyPruner(orders, { log, now: () => clock })
    pruner.start()
    await settle()
    assert.deepEqual(calls, [1, 2, 3].map(() => ({ now: new Date(Date.UTC(2026, 10, 27, 9)), limit: 1000 })), 'a pass at start, batch after batch')
    assert.deepEqual(lines, [{ level: 'info', fields: { deleted: 2007 }, message: 'idempotency keys pruned' }])
    clock += 60_000
    t.mock.timers.tick(59_999)
    assert.equal(calls.length, 3, 'none before a minute')
    t.mock.timers.tick(1)
    await settle()
    assert.equal(calls.length, 4, 'the next pass a minute later')
    assert.deepEqual(calls[3]!.now, new Date(clock))
    await pruner.stop()
    t.mock.timers.tick(10 * 60_000)
    assert.equal(calls.length, 4, 'no pass after stop')
    assert.equal(lines.length, 1, 'nothing logged for a pass that deleted nothing')
  })

  it('logs a failed pass and tries again at the next', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const failure = new Error('database down')
    let call = 0
    const orders = { pruneIdempotencyKeys: async () => (++call === 1 ? Promise.reject(failure) : 0) }
    const { log, lines } = recorder()
    const pruner = new IdempotencyKeyPruner(orders, { log, intervalMs: 1000 })
    pruner.start()
    await settle()
    t.mock.timers.tick(1000)
    await settle()
    assert.equal(call, 2)
    await pruner.stop()
    assert.deepEqual(lines, [{ level: 'warn', fields: { err: failure }, message: 'pruning idempotency keys failed; the next pass tries again' }])
  })
})

forEachStore('the Idempotency-Key pruner on a store', (kind) => {
  it('deletes the expired records only; a pruned key places anew', async () => {
    const server = await startTestServer(kind)
    const key = await server.createKey({ scopes: ['orders:write'] })
    for (const name of ['old-1', 'old-2', 'fresh']) assert.equal((await place(server.origin, key, '{"petId": 1, "quantity": 1}', name)).status, 201)
    const past = new Date(Date.now() - HOUR_MS)
    for (const name of ['old-1', 'old-2']) await sql(server, 'UPDATE idempotency_keys SET expires_at = ? WHERE key = ?', [kind === 'sqlite' ? past.toISOString() : past, name])
    const { lines, log } = recorder()
    const pruner = new IdempotencyKeyPruner(server.store.orders, { log, batch: 1 })
    assert.equal(await pruner.prune(), 2)
    await pruner.stop()
    assert.equal((await place(server.origin, key, '{"petId": 1, "quantity": 1}', 'fresh')).headers.get('idempotent-replayed'), 'true', 'kept')
    const renewed = await place(server.origin, key, '{"petId": 2, "quantity": 2}', 'old-1')
    assert.deepEqual([renewed.status, renewed.headers.get('idempotent-replayed')], [201, null], 'pruned: a new order')
    assert.deepEqual(lines, [])
  })
})

describe('IDEMPOTENCY_KEY_TTL_HOURS at start', () => {
  it('defaults to 24 and takes an integer from 1 to 8760', () => {
    assert.equal(loadConfig({}).idempotencyKeyTtlHours, 24)
    assert.equal(loadConfig({ IDEMPOTENCY_KEY_TTL_HOURS: '1' }).idempotencyKeyTtlHours, 1)
    assert.equal(loadConfig({ IDEMPOTENCY_KEY_TTL_HOURS: '8760' }).idempotencyKeyTtlHours, 8760)
    for (const bad of ['0', '8761', '1.5', '-1', 'day', '24h']) {
      assert.throws(() => loadConfig({ IDEMPOTENCY_KEY_TTL_HOURS: bad }), (error: Error) => {
        assert.match(error.message, /^IDEMPOTENCY_KEY_TTL_HOURS: must be an integer from 1 to 8760/)
        return true
      }, bad)
    }
  })
})
