import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { boundedTracestate, TRACESTATE_MAX_LENGTH, TRACESTATE_MAX_MEMBERS } from '../src/trace-context.js'

// What of a tracestate is passed on to a webhook receiver or kept with an event: W3C's limits.
describe('tracestate within the W3C limits', () => {
  it('keeps a tracestate within them as it is, but for blank members and spaces around members', () => {
    assert.equal(boundedTracestate('a=1,b=2'), 'a=1,b=2')
    assert.equal(boundedTracestate(' a=1 , ,b=2,'), 'a=1,b=2')
    assert.equal(boundedTracestate(''), '')
    assert.equal(boundedTracestate(' , '), '')
  })

  it(`keeps at most ${TRACESTATE_MAX_MEMBERS} members, the first ones`, () => {
    const members = Array.from({ length: 40 }, (_, i) => `k${i}=v`)
    assert.deepEqual(boundedTracestate(members.join(',')).split(','), members.slice(0, TRACESTATE_MAX_MEMBERS))
  })

  it(`keeps at most ${TRACESTATE_MAX_LENGTH} characters, dropping whole members from the end`, () => {
    const members = Array.from({ length: 10 }, (_, i) => `k${i}=${'x'.repeat(97)}`) // 100 characters each
    const kept = boundedTracestate(members.join(','))
    assert.equal(kept, members.slice(0, 5).join(',')) // 5 × 100 + 4 commas = 504; a sixth would make 605
    assert.equal(boundedTracestate(`${'a'.repeat(TRACESTATE_MAX_LENGTH + 1)},b=1`), '', 'a first member over the limit leaves none')
    const exact = `k=${'x'.repeat(TRACESTATE_MAX_LENGTH - 2)}`
    assert.equal(boundedTracestate(exact), exact)
  })
})
