import assert from 'node:assert/strict'
import { afterEach, describe, it, mock } from 'node:test'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { GroupCommit, type BatchResults } from '../src/store/group-commit.js'

// The schedule every store's group commit shares (src/store/group-commit.ts), without a database.
// Turns are stepped with setImmediate; the retry's timer and Date.now() are mocked.

/** A commit function whose batches settle when the test says so. */
function held<Request, Result>(answer: (requests: Request[]) => BatchResults<Result>) {
  const batches: Request[][] = []
  const settle: ((error?: Error) => void)[] = []
  const commit = (requests: Request[]): Promise<BatchResults<Result>> => {
    batches.push([...requests])
    return new Promise((resolve, reject) => settle.push((error) => (error === undefined ? resolve(answer(requests)) : reject(error))))
  }
  return { batches, settle, commit }
}

/** Whether a promise has settled, after the microtasks already queued. */
async function isSettled(promise: Promise<unknown>): Promise<boolean> {
  const pending = Symbol('pending')
  return (await Promise.race([promise.then(() => true, () => true), Promise.resolve(pending)])) !== pending
}

describe('GroupCommit', () => {
  afterEach(() => mock.timers.reset())

  it('commits the requests of one turn together, in its check phase, each with its own result, in order', async () => {
    const batches: number[][] = []
    const commit = new GroupCommit<number, string>({
      commit: (requests) => {
        batches.push([...requests])
        return requests.map((n) => `r${n}`)
      },
    })
    const results = Promise.all([commit.submit(1), commit.submit(2), commit.submit(3)])
    assert.deepEqual(batches, []) // nothing before the turn's I/O is done
    await nextTurn()
    assert.deepEqual(batches, [[1, 2, 3]])
    assert.deepEqual(await results, ['r1', 'r2', 'r3'])
    await Promise.all([commit.submit(4), nextTurn().then(() => commit.submit(5))])
    assert.deepEqual(batches, [[1, 2, 3], [4], [5]])
  })

  it('has one batch in flight at a time: what arrives meanwhile is the next batch, started after it settled', async () => {
    const { batches, settle, commit } = held<number, number>((requests) => requests.map((n) => n * 10))
    const scheduler = new GroupCommit({ commit })
    const first = [scheduler.submit(1), scheduler.submit(2)]
    await nextTurn()
    const second = [scheduler.submit(3), scheduler.submit(4)]
    await nextTurn()
    const third = scheduler.submit(5)
    await nextTurn()
    assert.deepEqual(batches, [[1, 2]])
    assert.equal(await isSettled(first[0]!), false) // settled only after its commit
    settle[0]!()
    assert.deepEqual(await Promise.all(first), [10, 20])
    await nextTurn()
    assert.deepEqual(batches, [[1, 2], [3, 4, 5]])
    settle[1]!()
    assert.deepEqual(await Promise.all([...second, third]), [30, 40, 50])
  })

  it('takes at most maxBatch requests a batch; the rest form the next ones', async () => {
    const batches: number[][] = []
    const scheduler = new GroupCommit<number, number>({
      maxBatch: 2,
      commit: async (requests) => {
        batches.push([...requests])
        return requests
      },
    })
    assert.deepEqual(await Promise.all([1, 2, 3, 4, 5].map((n) => scheduler.submit(n))), [1, 2, 3, 4, 5])
    assert.deepEqual(batches, [[1, 2], [3, 4], [5]])
  })

  it('rejects every request of a failed batch with its error, synchronous or not; the next batch is not affected', async () => {
    let fail = true
    const sync = new GroupCommit<number, number>({
      commit: (requests) => {
        if (fail) throw new Error('no room')
        return requests
      },
    })
    const results = await Promise.allSettled([sync.submit(1), sync.submit(2)])
    assert.deepEqual(
      results.map((r) => r.status === 'rejected' && (r.reason as Error).message),
      ['no room', 'no room'],
    )
    fail = false
    assert.equal(await sync.submit(3), 3)

    const { settle, commit } = held<number, number>((requests) => requests)
    const async = new GroupCommit({ commit })
    const failed = [async.submit(1), async.submit(2)].map((p) => p.then(() => 'resolved', (error: Error) => error.message))
    await nextTurn()
    settle[0]!(new Error('connection lost'))
    assert.deepEqual(await Promise.all(failed), ['connection lost', 'connection lost'])
    const next = async.submit(3)
    await nextTurn()
    settle[1]!()
    assert.equal(await next, 3)
  })

  it('settles a request whose result is a promise when that does, without holding up the next batch; drain waits for it', async () => {
    let late!: (value: string) => void
    const batches: string[][] = []
    const scheduler = new GroupCommit<string, string>({
      commit: (requests) => {
        batches.push([...requests])
        return requests.map((r) => (r === 'locked' ? new Promise<string>((resolve) => (late = resolve)) : r))
      },
    })
    const locked = scheduler.submit('locked')
    const free = scheduler.submit('free')
    assert.equal(await free, 'free')
    assert.equal(await scheduler.submit('next'), 'next')
    assert.deepEqual(batches, [['locked', 'free'], ['next']])
    let drained = false
    const draining = scheduler.drain().then(() => (drained = true))
    await nextTurn()
    assert.equal(drained, false)
    late('alone')
    assert.equal(await locked, 'alone')
    await draining
  })

  it('drain waits for what is queued and in flight, and returns at once when nothing is', async () => {
    await new GroupCommit<number, number>({ commit: (requests) => requests }).drain()
    const { settle, commit } = held<number, number>((requests) => requests)
    const scheduler = new GroupCommit({ commit })
    const settled: number[] = []
    void scheduler.submit(1).then((n) => settled.push(n))
    await nextTurn()
    void scheduler.submit(2).then((n) => settled.push(n))
    let drained = false
    const draining = scheduler.drain().then(() => (drained = true))
    settle[0]!()
    await nextTurn()
    await nextTurn()
    assert.deepEqual([settled, drained], [[1], false]) // the second batch is in flight
    settle[1]!()
    await draining
    assert.deepEqual(settled, [1, 2])
  })

  it('retries a batch refused for a transient error after afterMs, with what was queued meanwhile, until forMs since each was first refused', async () => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    let refuse = true
    const batches: number[][] = []
    const scheduler = new GroupCommit<number, number>({
      commit: (requests) => {
        batches.push([...requests])
        if (refuse) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
        return requests
      },
      retry: { transient: (error) => (error as { code?: string }).code === 'SQLITE_BUSY', afterMs: 25, forMs: 100 },
    })
    const old = scheduler.submit(1).catch((error: Error) => error.message)
    await nextTurn()
    assert.deepEqual(batches, [[1]])
    mock.timers.tick(25)
    mock.timers.tick(25)
    assert.deepEqual(batches, [[1], [1], [1]])
    const young = scheduler.submit(2) // joins the retry: no batch of its own
    await nextTurn()
    assert.equal(batches.length, 3)
    mock.timers.tick(25) // 2's first refusal
    mock.timers.tick(25) // 1 has been refused for its 100 ms: it fails with the lock's error, 2 waits on
    assert.equal(await old, 'database is locked')
    assert.deepEqual(batches.slice(3), [[1, 2], [1, 2]])
    refuse = false
    mock.timers.tick(25)
    assert.deepEqual(batches.at(-1), [2])
    assert.equal(await young, 2)
    await scheduler.drain()
  })

  it('does not count the time a request waited behind a batch in flight as time refused', async () => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    let calls = 0
    let release: (() => void) | undefined
    const scheduler = new GroupCommit<number, number>({
      commit: async (requests) => {
        calls++
        if (calls === 1) await new Promise<void>((resolve) => (release = resolve)) // a slow first batch
        if (calls === 2) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
        return requests
      },
      retry: { transient: (error) => (error as { code?: string }).code === 'SQLITE_BUSY', afterMs: 25, forMs: 100 },
    })
    const first = scheduler.submit(1)
    await nextTurn()
    const waiting = scheduler.submit(2) // queued behind the batch in flight
    mock.timers.tick(500) // far longer than forMs
    release!()
    assert.equal(await first, 1)
    await nextTurn()
    await nextTurn() // 2's batch: refused once, for the first time
    assert.equal(calls, 2)
    mock.timers.tick(25)
    assert.equal(await waiting, 2) // retried, not failed for the 500 ms it was queued
  })

  it('rejects a batch at once for an error that is not transient, with a retry policy too', async () => {
    const scheduler = new GroupCommit<number, number>({
      commit: () => {
        throw new Error('constraint failed')
      },
      retry: { transient: () => false, afterMs: 25, forMs: 100 },
    })
    await assert.rejects(scheduler.submit(1), /constraint failed/)
  })
})
