import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { DeliveryPacer } from '../src/webhooks/pacer.js'

/** A pacer whose windows are ended by the test: `load` is the utilization the next window reports. */
function pacer(busyRate = 100, quietWindows = 1): { pacer: DeliveryPacer; clock: { now: number }; load: { value: number } } {
  const clock = { now: 1000 }
  const load = { value: 0 }
  const value = new DeliveryPacer({ busyRate, quietWindows, utilization: () => load.value, now: () => clock.now })
  return { pacer: value, clock, load }
}

describe('DeliveryPacer (deliveries take the time the API leaves)', () => {
  it('lets deliveries start at once while the loop has time left, with or without requests', () => {
    const { pacer: p, load } = pacer()
    load.value = 0.5
    for (let i = 0; i < 20; i++) p.request()
    p.sample()
    assert.equal(p.busy, false)
    assert.equal(p.turn(), undefined)
    assert.equal(p.turn(), undefined)
  })

  it('never paces a busy loop without API requests: a backlog takes the whole loop', () => {
    const { pacer: p, load } = pacer()
    load.value = 1
    p.sample()
    assert.equal(p.busy, false)
    assert.equal(p.turn(), undefined)
  })

  it('spaces deliveries at the busy rate from a window 90% busy with API requests until one below 50% or without requests', async () => {
    const { pacer: p, clock, load } = pacer(100)
    load.value = 0.95
    p.request()
    p.sample()
    assert.equal(p.busy, true)
    assert.equal(p.turn(), undefined, 'the first goes at once')
    const second = p.turn()
    const third = p.turn()
    assert.ok(second instanceof Promise && third instanceof Promise)
    const started = performance.now()
    await third
    assert.ok(performance.now() - started >= 15, 'the third waits two slots of 10 ms')
    await second
    clock.now += 1000 // long after the last slot: the next goes at once, and the one after waits
    assert.equal(p.turn(), undefined)
    assert.ok(p.turn() instanceof Promise)

    // Busy, it stays so while requests keep the loop at least half busy, and not below.
    p.request()
    load.value = 0.6
    p.sample()
    assert.equal(p.busy, true)
    p.request()
    load.value = 0.45
    p.sample()
    assert.equal(p.busy, false)
    assert.equal(p.turn(), undefined)
    p.request()
    load.value = 0.6
    p.sample()
    assert.equal(p.busy, false, 'not busy again below 90%')
    p.request()
    load.value = 0.9
    p.sample()
    assert.equal(p.busy, true)

    // A window with no request ends the busy spell, whatever the utilization.
    load.value = 1
    p.sample()
    assert.equal(p.busy, false)
    assert.equal(p.turn(), undefined)
    assert.equal(p.turn(), undefined)
  })

  it('ends a busy spell only after as many quiet windows in a row as it is told (10 by default: half a second)', () => {
    const { pacer: p, load } = pacer(100, 3)
    const window = (requests: number, utilization: number): boolean => {
      for (let i = 0; i < requests; i++) p.request()
      load.value = utilization
      p.sample()
      return p.busy
    }
    assert.equal(window(5, 0.95), true)
    assert.equal(window(0, 0.1), true, 'a pause of one window')
    assert.equal(window(5, 0.2), true)
    assert.equal(window(5, 0.6), true, 'a window that keeps it busy starts the count again')
    assert.equal(window(0, 1), true)
    assert.equal(window(5, 0.3), true)
    assert.equal(window(0, 0), false, 'the third quiet window in a row')
    assert.equal(p.turn(), undefined)
  })

  it('reads the real event loop when started, and is idle after stop', async () => {
    const p = new DeliveryPacer({ windowMs: 20 })
    p.start()
    try {
      const until = performance.now() + 150
      // Busy-wait with requests arriving: the loop is saturated by "API work".
      while (performance.now() < until) {
        p.request()
        await new Promise((resolve) => setImmediate(resolve))
        const spin = performance.now() + 5
        while (performance.now() < spin);
      }
      assert.equal(p.busy, true)
    } finally {
      p.stop()
    }
    assert.equal(p.busy, false)
    assert.equal(p.turn(), undefined)
  })
})
