import type { OrderEventType } from './order-events.js'

/**
 * The webhooks' side of a store (docs/webhooks.md): endpoints, each a consumer of the order event
 * feed with its own position, and the last attempts of each. The dispatcher of every instance takes
 * endpoints through leases in the database, so at most one delivery per endpoint is in flight across
 * all instances; a lease whose holder crashed expires and another instance takes the endpoint over.
 * Every write of the dispatcher is conditional on its lease: one that lost its lease changes nothing.
 */

/** Why an endpoint is disabled. */
export const WEBHOOK_DISABLED_REASONS = ['endpoint_gone', 'retries_exhausted', 'events_expired', 'disabled_by_request'] as const
export type WebhookDisabledReason = (typeof WEBHOOK_DISABLED_REASONS)[number]

/** An endpoint as the API shows it (never with its secrets). Instants are RFC 3339 UTC, toISOString() form. */
export interface WebhookEndpoint {
  /** int64, given by the store, never reused. */
  id: bigint
  url: string
  /** The event types it is sent, in ORDER_EVENT_TYPES order; every type unless told otherwise. */
  eventTypes: OrderEventType[]
  description: string | null
  enabled: boolean
  disabledReason: WebhookDisabledReason | null
  /** The feed position through which it has been served: every event at or before it is done with. */
  position: bigint
  /** Since when its current event has been failing; null when it is not failing. */
  failingSince: string | null
  /** When its current event is tried again; null when no retry is scheduled. */
  nextAttemptAt: string | null
  createdAt: string
}

/** The secrets that sign an endpoint's deliveries: `whsec_` + base64 of 32 random bytes each. */
export interface WebhookSecrets {
  current: string
  /** The secret before the last rotation, which also signs until `previousUntil`. */
  previous: string | null
  previousUntil: string | null
}

/** One delivery attempt, as the API shows it: never a response body or a secret. */
export interface WebhookAttempt {
  /** The event's feed position (its `webhook-id`). */
  eventId: bigint
  attemptedAt: string
  /** The HTTP status, when a response came. */
  status: number | null
  /** A short error (timeout, refused, an address not allowed, …), when no 2xx came. */
  error: string | null
  durationMs: number
}

export interface NewWebhookEndpoint {
  url: string
  eventTypes: OrderEventType[]
  description: string | null
  secret: string
}

export interface WebhookEndpointPatch {
  url?: string
  eventTypes?: OrderEventType[]
  description?: string | null
  /** true: enabled again, at the position it stopped at (reason, failure and retry cleared); false: disabled_by_request. */
  enabled?: boolean
}

/** An endpoint leased to one dispatcher (`owner`) until `leaseUntil`, with what delivering needs. */
export interface WebhookLease {
  endpoint: WebhookEndpoint
  secrets: WebhookSecrets
  owner: string
  leaseUntil: Date
  /** Failed attempts of its current event so far (0: none): the index into the retry schedule. */
  failures: number
  /**
   * The endpoint's revision when leased: every change that alters a delivery (url, event types,
   * enabled, secret, replay, deletion) moves it, so a holder learns that its view is stale.
   */
  revision: number
  /** Set by `advance` when the endpoint changed since the lease: its next delivery must lease it anew. */
  changed: boolean
}

/** An event of the feed, as a delivery sends it. */
export interface FeedEvent {
  position: bigint
  type: OrderEventType
  occurredAt: string
  /** The event's JSON exactly as the feed shows it: `{"id":"<position>","type":…,"occurredAt":…,"order":{…}}`. */
  json: string
}

/** What follows a leased endpoint's position in the feed. */
export type NextEvents =
  /** The next events of its types, ascending (may be empty); `through`: the last position read, matching or not. */
  | { events: FeedEvent[]; through: bigint }
  /** Events after its position have been deleted by retention. */
  | 'expired'

export interface WebhooksRepository {
  /**
   * A new enabled endpoint whose position is the head of the feed at its commit (it is sent every
   * event committed after it). `too_many` when `maxEndpoints` exist already (nothing written).
   */
  create(endpoint: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | 'too_many'>
  /** Every endpoint, ascending id. */
  list(): Promise<WebhookEndpoint[]>
  find(id: bigint): Promise<WebhookEndpoint | undefined>
  /** Applies the patch; undefined when there is no such endpoint. */
  update(id: bigint, patch: WebhookEndpointPatch): Promise<WebhookEndpoint | undefined>
  /** Deletes it and its attempts; false when there is no such endpoint. A delivery in flight ends with its lease. */
  remove(id: bigint): Promise<boolean>
  /** The new current secret; the old one signs too until `previousUntil`. False when there is no such endpoint. */
  rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<boolean>
  /**
   * Sets its position to `after` (it is sent every later event of its types again, from the next),
   * enables it, clears failure and retry. Throws EventsExpiredError / UnknownEventPositionError
   * (../order-events.ts) as the feed does for such a cursor; undefined when there is no such endpoint.
   */
  replay(id: bigint, after: bigint): Promise<WebhookEndpoint | undefined>
  /** Its attempts, newest first, at most `limit` (the store keeps the last 100); undefined: no such endpoint. */
  attempts(id: bigint, limit: number): Promise<WebhookAttempt[] | undefined>
  /**
   * The secrets that sign its deliveries at `now`, as they are now (a test delivery reads them when
   * it is sent): the current one, and the previous one only while `previousUntil` is after `now`.
   * Undefined: no such endpoint.
   */
  signingSecrets(id: bigint, now: Date): Promise<WebhookSecrets | undefined>

  /**
   * Leases to `owner`, until now + `leaseMs`, at most `limit` endpoints that are enabled, due
   * (`nextAttemptAt` null or past), not leased (or whose lease expired: one `owner` holds is not
   * leased to it again either), and behind the head of the feed. One statement per call; two owners
   * never hold one endpoint. A previous secret whose `previousUntil` is not after `now` is left out.
   */
  lease(owner: string, now: Date, leaseMs: number, limit: number): Promise<WebhookLease[]>
  /** Extends a lease held; false when it was lost (expired and taken, or the endpoint removed or disabled). */
  renew(lease: WebhookLease, now: Date, leaseMs: number): Promise<boolean>
  /**
   * Ends a lease held (no-op when lost). Its end is kept as the lease's time, so that the endpoints
   * released longest ago are leased first: endpoints take turns.
   */
  release(lease: WebhookLease): Promise<void>
  /** Whether the lease is still held and the endpoint unchanged since it (a read). */
  unchanged(lease: WebhookLease): Promise<boolean>
  /** At most `limit` events of the lease's types after its position (read as one snapshot). */
  next(lease: WebhookLease, limit: number): Promise<NextEvents>
  /**
   * The event at `position` got a 2xx (or, with `attempt` null, there was none of its types up to
   * `position`): the position moves to it, failure and retry are cleared, the attempt is recorded
   * (the endpoint's oldest beyond 100 deleted). False, and nothing written, when the lease was lost
   * or a replay moved the position since the lease's (every write under a lease checks both). On
   * success `lease.endpoint` (position, failure and retry) and `lease.failures` say so, so that
   * `next(lease)` reads on from there, and `lease.changed` says whether the endpoint was changed
   * since the lease (the delivery just made was the last under it).
   */
  advance(lease: WebhookLease, position: bigint, attempt: WebhookAttempt | null): Promise<boolean>
  /**
   * The attempt failed: recorded; then either tried again at `retryAt` (failures + 1, failingSince
   * set if not yet) or disabled with `disable`; the lease ends. False when the lease was lost.
   */
  fail(lease: WebhookLease, attempt: WebhookAttempt, next: { retryAt: Date } | { disable: WebhookDisabledReason }): Promise<boolean>
  /** Disables it (e.g. `events_expired`) under its lease, which ends. */
  disable(lease: WebhookLease, reason: WebhookDisabledReason): Promise<boolean>
  /**
   * Every enabled endpoint's lag: positions given out after its position, events of any type (for
   * the metrics). Read from positions, never by counting events, so it costs the same at any
   * backlog; a position skipped by a rolled-back write counts too.
   */
  lag(): Promise<{ id: bigint; events: bigint }[]>
  /** Erases every previous secret whose signing window ended at or before `now`; how many. */
  forgetPreviousSecrets(now: Date): Promise<number>
}
