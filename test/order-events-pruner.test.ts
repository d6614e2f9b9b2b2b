import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ConfigError, loadConfig } from '../src/config.js'
import { EventPruner, type EventPrunerOptions } from '../src/pruning/event-pruner.js'
import type { OrderEventsRepository } from '../src/store/order-events.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, forEachStore, order, records, within, type TestDatabaseHandle } from './support/harness.js'

const DAY_MS = 86_400_000

/** Lets the promises of a pass settle (setImmediate is not mocked). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

interface Logged {
  level: 'info' | 'warn'
  fields: Record<string, unknown>
  message: string
}

function recorder(): { log: EventPrunerOptions['log']; lines: Logged[] } {
  const lines: Logged[] = []
  return {
    lines,
    log: {
      info: (fields, message) => void lines.push({ level: 'info', fields: fields as Record<string, unknown>, message }),
      warn: (fields, message) => void lines.push({ level: 'warn', fields: fields as Record<string, unknown>, message }),
    },
  }
}

/** A repository whose prune answers from `answer` (the nth call), recording each call's cutoff and batch. */
function fakeEvents(answer: (call: number) => Promise<number> | number): OrderEventsRepository & { calls: { before: Date; batch: number | undefined }[] } {
  const calls: { before: Date; batch: number | undefined }[] = []
  return {
    calls,
    read: () => assert.fail('the pruner never reads'),
    prune: async (before, batch) => {
      calls.push({ before, batch })
      return answer(calls.length)
    },
  }
}

forEachStore('event retention: the pruner on a real store', (kind) => {
  let database: TestDatabaseHandle
  let store: Store

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
  })
  after(async () => {
    await store?.close()
    await database?.dispose()
  })

  it('deletes exactly the events older than the retention, a batch per call, calling again while a batch is full', async () => {
    await store.orders.import(records(Array.from({ length: 7 }, (_, i) => order({ id: BigInt(i + 1) }))))
    const counts: number[] = []
    const events: OrderEventsRepository = {
      read: (afterPosition, limit) => store.events.read(afterPosition, limit),
      prune: async (before, batch) => {
        const deleted = await store.events.prune(before, batch)
        counts.push(deleted)
        return deleted
      },
    }
    const { log } = recorder()
    // The events occurred now: 29 days on, a 30-day retention keeps them all; 31 days on, none.
    const keep = new EventPruner(events, { retentionDays: 30, batch: 2, log, now: () => Date.now() + 29 * DAY_MS })
    assert.equal(await keep.prune(), 0)
    assert.deepEqual(counts, [0])
    assert.equal((await store.events.read(undefined, 100)).count, 7)
    counts.length = 0
    const drop = new EventPruner(events, { retentionDays: 30, batch: 2, log, now: () => Date.now() + 31 * DAY_MS })
    assert.equal(await drop.prune(), 7)
    assert.deepEqual(counts, [2, 2, 2, 1])
    const page = await store.events.read(undefined, 100)
    assert.equal(page.count, 0)
    // A full last batch costs one more call, which finds nothing.
    await store.orders.import(records(Array.from({ length: 4 }, (_, i) => order({ id: BigInt(i + 1), status: 'shipped' }))))
    counts.length = 0
    assert.equal(await drop.prune(), 4)
    assert.deepEqual(counts, [2, 2, 0])
  })
})

describe('event retention: the pruner\'s schedule', () => {
  it('runs a pass at start and then every interval, with the cutoff now minus the retention, in batches of 1000', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const events = fakeEvents(() => 0)
    const { log, lines } = recorder()
    const now = Date.UTC(2026, 10, 26, 12)
    const pruner = new EventPruner(events, { retentionDays: 30, intervalMs: 40, log, now: () => now })
    pruner.start()
    assert.equal(events.calls.length, 1, 'a pass at start')
    assert.deepEqual(events.calls[0], { before: new Date(now - 30 * DAY_MS), batch: 1000 })
    await settle() // the pass ends, and schedules the next
    t.mock.timers.tick(39)
    assert.equal(events.calls.length, 1, 'none before the interval')
    t.mock.timers.tick(1)
    await settle()
    t.mock.timers.tick(40)
    assert.equal(events.calls.length, 3, 'one pass every interval')
    await pruner.stop()
    t.mock.timers.tick(400)
    assert.equal(events.calls.length, 3, 'no pass after stop')
    assert.deepEqual(lines, [], 'nothing to say when nothing was deleted')
  })

  it('logs what a pass deleted', async () => {
    const events = fakeEvents((call) => [1000, 1000, 3][call - 1] ?? 0)
    const { log, lines } = recorder()
    const pruner = new EventPruner(events, { retentionDays: 7, log })
    pruner.start()
    await within(10_000, 'the pass', () => lines.length === 1)
    await pruner.stop()
    assert.deepEqual(lines, [{ level: 'info', fields: { deleted: 2003, retentionDays: 7 }, message: 'order events pruned' }])
  })

  it('logs a failed pass without throwing, and the next pass tries again', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const failure = new Error('database down')
    const events = fakeEvents((call) => (call <= 2 ? Promise.reject(failure) : 0))
    const { log, lines } = recorder()
    const pruner = new EventPruner(events, { retentionDays: 30, intervalMs: 20, log })
    pruner.start()
    for (let pass = 2; pass <= 3; pass++) {
      await settle()
      t.mock.timers.tick(20)
      assert.equal(events.calls.length, pass, `pass ${pass}, an interval after the failed one`)
    }
    await pruner.stop()
    assert.deepEqual(lines.map((line) => [line.level, line.fields.err]), [['warn', failure], ['warn', failure]])
  })

  it('yields to the event loop between batches, and stop() ends a pass after its current batch', async () => {
    // Counts turns of the event loop: one immediate per turn, each queueing the next.
    let turns = 0
    let counting = true
    const count = (): void => {
      turns++
      if (counting) setImmediate(count)
    }
    setImmediate(count)
    const seen: number[] = []
    let release: (() => void) | undefined
    const events = fakeEvents(async (call) => {
      seen.push(turns)
      if (call === 5) await new Promise<void>((resolve) => (release = resolve)) // a batch in progress
      return 1000 // always full: only stop() ends the pass
    })
    const { log } = recorder()
    const pruner = new EventPruner(events, { retentionDays: 30, log })
    pruner.start()
    await within(10_000, 'the fifth batch', () => release !== undefined)
    counting = false
    assert.ok(seen[4]! - seen[0]! >= 3, `turns of the event loop between the batches: ${seen}`)
    let stopped = false
    const stopping = pruner.stop().then(() => (stopped = true))
    await sleep(20)
    assert.equal(stopped, false, 'stop() waits for the batch in progress')
    release!()
    await stopping
    assert.equal(events.calls.length, 5, 'no batch after stop')
  })
})

describe('event feed configuration', () => {
  it('EVENTS_RETENTION_DAYS: 30 days by default, an integer from 1 to 36500', () => {
    assert.equal(loadConfig({}).events.retentionDays, 30)
    assert.equal(loadConfig({ EVENTS_RETENTION_DAYS: '1' }).events.retentionDays, 1)
    assert.equal(loadConfig({ EVENTS_RETENTION_DAYS: '36500' }).events.retentionDays, 36500)
    for (const value of ['0', '36501', '-1', '1.5', '30d', 'thirty']) {
      assert.throws(() => loadConfig({ EVENTS_RETENTION_DAYS: value }), (error: unknown) => {
        assert.ok(error instanceof ConfigError)
        assert.match(error.message, /^EVENTS_RETENTION_DAYS: must be an integer from 1 to 36500/)
        return true
      })
    }
  })

  it('EVENTS_MAX_WAITING: 1000 by default (at most half of HTTP_MAX_CONNECTIONS), 0 holds none, always below HTTP_MAX_CONNECTIONS', () => {
    assert.equal(loadConfig({}).events.maxWaiting, 1000)
    assert.equal(loadConfig({ HTTP_MAX_CONNECTIONS: '100' }).events.maxWaiting, 50)
    assert.equal(loadConfig({ EVENTS_MAX_WAITING: '0' }).events.maxWaiting, 0)
    assert.equal(loadConfig({ EVENTS_MAX_WAITING: '99', HTTP_MAX_CONNECTIONS: '100' }).events.maxWaiting, 99)
    assert.throws(() => loadConfig({ EVENTS_MAX_WAITING: '100', HTTP_MAX_CONNECTIONS: '100' }), /^ConfigError: EVENTS_MAX_WAITING: must be below HTTP_MAX_CONNECTIONS \(100\), got "100"$/)
    assert.throws(() => loadConfig({ EVENTS_MAX_WAITING: 'many' }), /EVENTS_MAX_WAITING: must be an integer from 0 to 100000/)
    assert.throws(() => loadConfig({ EVENTS_MAX_WAITING: '100001' }), /EVENTS_MAX_WAITING/)
  })
})
