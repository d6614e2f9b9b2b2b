import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Histogram, Registry } from 'prom-client'
import { DurationHistogram } from '../src/http/duration-histogram.js'

describe('DurationHistogram', () => {
  it("renders exactly what prom-client's own Histogram renders for the same observations", async () => {
    const bounds = [0.001, 0.005, 0.1, 1]
    const ours = new Registry()
    const theirs = new Registry()
    const histogram = new DurationHistogram<'method' | 'status'>('request_seconds', 'Request durations', bounds, ours)
    const reference = new Histogram({ name: 'request_seconds', help: 'Request durations', labelNames: ['method', 'status'], buckets: bounds, registers: [theirs] })
    // On a bound (le is inclusive), between bounds, past the last one, zero; two series.
    const observations: [string, number, number][] = [
      ['GET', 200, 0],
      ['GET', 200, 0.001],
      ['GET', 200, 0.0011],
      ['GET', 200, 0.1],
      ['GET', 200, 3.5],
      ['DELETE', 204, 0.004],
    ]
    const series = new Map<string, ReturnType<typeof histogram.series>>()
    for (const [method, status, seconds] of observations) {
      const id = `${method} ${status}`
      if (!series.has(id)) series.set(id, histogram.series({ method, status }))
      series.get(id)!.observe(seconds)
      reference.observe({ method, status }, seconds)
    }
    const text = await ours.metrics()
    assert.equal(text, await theirs.metrics())
    assert.match(text, /request_seconds_bucket\{le="0.001",method="GET",status="200"\} 2\n/)
    assert.match(text, /request_seconds_bucket\{le="\+Inf",method="GET",status="200"\} 5\n/)
  })
})
