import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  disabled,
  failDelivery,
  heldBy,
  leasePass,
  patchEndpoint,
  renewLease,
  rotateSecret,
  signingSecretsAt,
  type EndpointState,
  type WebhookLease,
} from '../src/domain/webhooks.js'

// The webhook endpoints' rules, without a database: what each change makes of an endpoint, and the
// values the stores' conditional statements take.

const NOW = new Date('2026-12-01T10:00:00.000Z')

function state(fields: Partial<EndpointState> = {}): EndpointState {
  return {
    url: 'https://hooks.example/petstore',
    eventTypes: ['order.created'],
    description: null,
    enabled: true,
    disabledReason: null,
    position: 42n,
    failingSince: null,
    nextAttemptAt: null,
    failures: 0,
    ...fields,
  }
}

function lease(fields: Partial<WebhookLease> = {}): WebhookLease {
  return {
    endpoint: {
      id: 7n,
      url: 'https://hooks.example/petstore',
      eventTypes: ['order.created'],
      description: null,
      enabled: true,
      disabledReason: null,
      position: 42n,
      failingSince: null,
      nextAttemptAt: null,
      createdAt: '2026-11-01T00:00:00.000Z',
    },
    secrets: { current: 'whsec_a', previous: null, previousUntil: null },
    owner: 'instance-a',
    leaseUntil: new Date(NOW.getTime() + 1000),
    failures: 0,
    revision: 3,
    changed: false,
    ...fields,
  }
}

describe('webhook endpoint rules', () => {
  it('disabling: disabled with its reason and no retry; a PATCH disables the same way', () => {
    assert.deepEqual(disabled('events_expired'), { enabled: false, disabledReason: 'events_expired', nextAttemptAt: null })
    const failing = state({ failures: 2, failingSince: '2026-12-01T09:00:00.000Z', nextAttemptAt: '2026-12-01T10:05:00.000Z' })
    assert.deepEqual(patchEndpoint(failing, { enabled: false }).state, { ...failing, ...disabled('disabled_by_request') })
  })

  it('a first failure: one failure, failing since its attempt, retried at its time', () => {
    const retryAt = new Date('2026-12-01T10:01:00.000Z')
    assert.deepEqual(failDelivery(state(), '2026-12-01T10:00:00.500Z', { retryAt }), {
      ...state(),
      failures: 1,
      failingSince: '2026-12-01T10:00:00.500Z',
      nextAttemptAt: '2026-12-01T10:01:00.000Z',
    })
  })

  it('a later failure keeps when the failing began; one past the schedule disables, keeping position and failures', () => {
    const failing = state({ failures: 3, failingSince: '2026-12-01T08:00:00.000Z', nextAttemptAt: '2026-12-01T09:59:00.000Z' })
    assert.deepEqual(failDelivery(failing, NOW.toISOString(), { retryAt: new Date('2026-12-01T11:00:00.000Z') }), {
      ...failing,
      failures: 4,
      nextAttemptAt: '2026-12-01T11:00:00.000Z',
    })
    assert.deepEqual(failDelivery(failing, NOW.toISOString(), { disable: 'retries_exhausted' }), {
      ...failing,
      failures: 4,
      enabled: false,
      disabledReason: 'retries_exhausted',
      nextAttemptAt: null,
    })
  })

  it('a failure of an endpoint disabled meanwhile leaves it disabled, its reason kept, when a retry is chosen', () => {
    const off = state({ ...disabled('disabled_by_request') })
    const failed = failDelivery(off, NOW.toISOString(), { retryAt: new Date('2026-12-01T10:01:00.000Z') })
    assert.equal(failed.enabled, false)
    assert.equal(failed.disabledReason, 'disabled_by_request')
  })

  it('a lease pass: until leaseMs on, of endpoints due and free as of now', () => {
    assert.deepEqual(leasePass(NOW, 30_000), { until: new Date('2026-12-01T10:00:30.000Z'), asOf: '2026-12-01T10:00:00.000Z' })
  })

  it('a renewal: live after now, until leaseMs on', () => {
    assert.deepEqual(renewLease(NOW, 30_000), { liveAfter: '2026-12-01T10:00:00.000Z', until: new Date('2026-12-01T10:00:30.000Z') })
  })

  it('a write under a lease requires its holder, unexpired now, at the lease position', () => {
    assert.deepEqual(heldBy(lease(), NOW), { id: 7n, owner: 'instance-a', liveAfter: '2026-12-01T10:00:00.000Z', position: 42n })
  })

  it('a rotation: the current secret becomes the previous until its time', () => {
    const until = new Date('2026-12-02T10:00:00.000Z')
    assert.deepEqual(rotateSecret('whsec_old', 'whsec_new', until), { current: 'whsec_new', previous: 'whsec_old', previousUntil: '2026-12-02T10:00:00.000Z' })
  })

  it('a previous secret signs until its window ends, not at its end (when a store forgets it)', () => {
    const until = '2026-12-01T10:00:00.000Z'
    assert.deepEqual(signingSecretsAt('whsec_new', 'whsec_old', until, new Date(NOW.getTime() - 1)), { current: 'whsec_new', previous: 'whsec_old', previousUntil: until })
    assert.deepEqual(signingSecretsAt('whsec_new', 'whsec_old', until, NOW), { current: 'whsec_new', previous: null, previousUntil: null })
  })
})
