import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'
import { EventWaiters, type WaitOutcome } from '../src/events/event-waiters.js'

/** A data version the test moves, counting how often it is read. */
function version(start = 1n): { read: () => bigint; reads: () => number; bump: () => void; fail: (error?: Error) => void } {
  let value = start
  let reads = 0
  let failure: Error | undefined
  return {
    read: () => {
      reads++
      if (failure !== undefined) throw failure
      return value
    },
    reads: () => reads,
    bump: () => void value++,
    fail: (error) => void (failure = error),
  }
}

const never = new AbortController().signal

/** Lets the promises of what the timers ran settle (setImmediate is not mocked). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/**
 * Moves the mocked setTimeout clock `ms` forward, `step` at a time, letting each poll settle in
 * between (a poll schedules the next one only once its read has settled): the polls and deadlines
 * run as they would in `ms` of real time, however loaded the machine is.
 */
async function advance(t: TestContext, ms: number, step = 5): Promise<void> {
  for (let passed = 0; passed < ms; passed += step) {
    t.mock.timers.tick(Math.min(step, ms - passed))
    await settle()
  }
}

/** The outcome of `promise` once settled, else 'pending'. */
function outcomeOf<T>(promise: Promise<T>): () => T | 'pending' {
  let outcome: T | 'pending' = 'pending'
  void promise.then((value) => (outcome = value))
  return () => outcome
}

describe('event feed waiters', () => {
  it('ten keys holding a tenth each fill the instance; an eleventh key still gets a slot: the oldest request of a key holding the most is answered', async () => {
    const v = version()
    const waiters = new EventWaiters(v.read, { maxWaiting: 100, pollIntervalMs: 20 })
    const answered: string[] = []
    const hold = (holder: string, name: string): Promise<WaitOutcome> =>
      waiters.wait(1n, 10_000, never, holder).then((outcome) => {
        answered.push(name)
        return outcome
      })
    const tenths = Array.from({ length: 10 }, (_, k) => Array.from({ length: 10 }, (_, i) => hold(`key ${k}`, `key ${k} #${i}`)))
    assert.equal(waiters.size, 100)
    const eleventh = hold('key 10', 'key 10 #0')
    assert.equal(await tenths[0]![0], 'full', "the oldest request of the first key holding the most makes room, answered at once")
    assert.deepEqual(answered, ['key 0 #0'])
    assert.equal(waiters.size, 100)
    // A key holding one fewer than the most would only move the imbalance: it is answered at once.
    assert.equal(await hold('key 0', 'key 0 again'), 'full')
    const twelfth = hold('key 10', 'key 10 #1') // key 10 holds 1, the most is 10: room is made again
    assert.equal(await tenths[1]![0], 'full')
    assert.equal(waiters.size, 100)
    assert.deepEqual(answered.slice(1), ['key 0 again', 'key 1 #0'])
    v.bump()
    const outcomes = await Promise.all([...tenths.flat(), eleventh, twelfth])
    assert.equal(outcomes.filter((outcome) => typeof outcome === 'object').length, 100, 'every request still held is woken by the change')
    assert.equal(waiters.size, 0)
    waiters.close()
  })

  it('lets one key use every slot while no other key wants one, and gives a slot back to the next key', async () => {
    const v = version()
    const waiters = new EventWaiters(v.read, { maxWaiting: 20, pollIntervalMs: 20 })
    const one = Array.from({ length: 20 }, () => waiters.wait(1n, 10_000, never, 'key 1'))
    assert.equal(waiters.size, 20, 'no cap per key below the instance\'s')
    assert.equal(await waiters.wait(1n, 10_000, never, 'key 1'), 'full', 'the 21st of the same key is answered at once')
    const other = waiters.wait(1n, 10_000, never, 'key 2')
    assert.equal(await one[0], 'full', 'its oldest request made room for key 2')
    assert.equal(waiters.size, 20)
    v.bump()
    assert.deepEqual(await other, { changed: 2n })
    await Promise.all(one)
    assert.equal(waiters.size, 0)
    waiters.close()
  })

  it('answers a held request at its deadline even while a version read hangs (the database unreachable)', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const waiters = new EventWaiters(() => new Promise<bigint>(() => {}), { maxWaiting: 10, pollIntervalMs: 20 })
    const outcome = outcomeOf(waiters.wait(1n, 200, never))
    await advance(t, 199)
    assert.equal(outcome(), 'pending', 'held until its deadline')
    await advance(t, 1)
    assert.equal(outcome(), 'timeout', 'answered at its deadline, the read still hanging')
    waiters.close()
  })

  it('reads the version on one timer for all held requests, only while some are held', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const v = version()
    const waiters = new EventWaiters(v.read, { maxWaiting: 100, pollIntervalMs: 20 })
    await advance(t, 100)
    assert.equal(v.reads(), 0, 'no timer while nothing is held')
    const held = Array.from({ length: 50 }, () => waiters.wait(1n, 10_000, never))
    assert.equal(waiters.size, 50)
    await advance(t, 210)
    assert.equal(v.reads(), 10, 'one read per poll (every 20 ms) for the 50 requests')
    v.bump()
    await advance(t, 20)
    for (const outcome of await Promise.all(held)) assert.deepEqual(outcome, { changed: 2n })
    assert.equal(waiters.size, 0)
    assert.equal(v.reads(), 11)
    await advance(t, 100)
    assert.equal(v.reads(), 11, 'the timer stops with the last held request')
  })

  it('wakes only the requests whose version moved; the others wait on until their own deadline', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const v = version(5n)
    const waiters = new EventWaiters(v.read, { maxWaiting: 10, pollIntervalMs: 10 })
    const stale = outcomeOf(waiters.wait(4n, 10_000, never)) // saw an older version: woken at the first poll
    const current = outcomeOf(waiters.wait(5n, 150, never))
    await advance(t, 10)
    assert.deepEqual(stale(), { changed: 5n })
    await advance(t, 139)
    assert.equal(current(), 'pending', 'the version it saw has not moved: held on')
    await advance(t, 1)
    assert.equal(current(), 'timeout')
    waiters.close()
  })

  it('answers full past maxWaiting, gone for an aborted client, closing once closed, timeout for no time left', async () => {
    const v = version()
    const waiters = new EventWaiters(v.read, { maxWaiting: 2, pollIntervalMs: 10 })
    const client = new AbortController()
    const first = waiters.wait(1n, 10_000, client.signal)
    const second = waiters.wait(1n, 10_000, never)
    assert.equal(await waiters.wait(1n, 10_000, never), 'full')
    client.abort()
    assert.equal(await first, 'gone')
    assert.equal(waiters.size, 1)
    assert.equal(await waiters.wait(1n, 10_000, client.signal), 'gone', 'a client already gone is not held')
    assert.equal(await waiters.wait(1n, 0, never), 'timeout')
    waiters.close()
    assert.equal(await second, 'closing')
    assert.equal(await waiters.wait(1n, 10_000, never), 'closing')
    assert.equal(waiters.size, 0)
  })

  it('keeps waiting while the version cannot be read, tells it once, and wakes once it can', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const v = version()
    const errors: unknown[] = []
    const waiters = new EventWaiters(v.read, { maxWaiting: 10, pollIntervalMs: 10, onError: (error) => errors.push(error) })
    const down = new Error('database down')
    v.fail(down)
    const held = outcomeOf(waiters.wait(1n, 10_000, never))
    await advance(t, 100)
    assert.equal(v.reads(), 10, 'a read every poll')
    assert.equal(waiters.size, 1)
    assert.deepEqual(errors, [down], 'once per outage')
    v.fail(undefined)
    v.bump()
    await advance(t, 10)
    assert.deepEqual(held(), { changed: 2n })
    const timedOut = outcomeOf(waiters.wait(2n, 50, never))
    v.fail(down)
    await advance(t, 49)
    assert.equal(timedOut(), 'pending')
    await advance(t, 1)
    assert.equal(timedOut(), 'timeout', 'the deadline holds while the database is down')
    assert.equal(errors.length, 2)
    waiters.close()
  })
})
