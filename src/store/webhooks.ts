import type {
  AfterFailure,
  NewWebhookEndpoint,
  NextEvents,
  WebhookAttempt,
  WebhookDisabledReason,
  WebhookEndpoint,
  WebhookEndpointPatch,
  WebhookLease,
  WebhookSecrets,
} from '../domain/webhooks.js'

/**
 * The webhooks' side of a store (docs/webhooks.md): endpoints, each a consumer of the order event
 * feed with its own position, and the last attempts of each. The dispatcher of every instance takes
 * endpoints through leases in the database, so at most one delivery per endpoint is in flight across
 * all instances; a lease whose holder crashed expires and another instance takes the endpoint over.
 * Every write of the dispatcher is conditional on its lease: one that lost its lease changes nothing.
 * What a change makes of an endpoint is decided in domain/webhooks.ts; a store keeps its SQL.
 */
export interface WebhooksRepository {
  /**
   * A new enabled endpoint whose position is the head of the feed at its commit (it is sent every
   * event committed after it). `too_many` when `maxEndpoints` exist already (nothing written).
   */
  create(endpoint: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | 'too_many'>
  /** Every endpoint, ascending id. */
  list(): Promise<WebhookEndpoint[]>
  find(id: bigint): Promise<WebhookEndpoint | undefined>
  /** Applies the patch (patchEndpoint); undefined when there is no such endpoint. */
  update(id: bigint, patch: WebhookEndpointPatch): Promise<WebhookEndpoint | undefined>
  /** Deletes it and its attempts; false when there is no such endpoint. A delivery in flight ends with its lease. */
  remove(id: bigint): Promise<boolean>
  /** The new current secret; the old one signs too until `previousUntil`. False when there is no such endpoint. */
  rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<boolean>
  /**
   * Replays it from `after` (replayEndpoint: it is sent every later event of its types again, from
   * the next). Throws EventsExpiredError / UnknownEventPositionError (checkCursor) as the feed does
   * for such a cursor; undefined when there is no such endpoint.
   */
  replay(id: bigint, after: bigint): Promise<WebhookEndpoint | undefined>
  /** Its attempts, newest first, at most `limit` (the store keeps the last 100); undefined: no such endpoint. */
  attempts(id: bigint, limit: number): Promise<WebhookAttempt[] | undefined>
  /**
   * The secrets that sign its deliveries at `now` (signingSecretsAt), as they are now (a test
   * delivery reads them when it is sent). Undefined: no such endpoint.
   */
  signingSecrets(id: bigint, now: Date): Promise<WebhookSecrets | undefined>
  /**
   * Claims the endpoint's one ping in flight for `token` until `until`: 'claimed', or 'in_flight'
   * while another claim holds it past `now` (one whose time is over, left by an instance that died,
   * is taken over); undefined when there is no such endpoint. One statement: of any number of claims
   * at once, on any number of instances, one wins.
   */
  claimPing(id: bigint, token: string, now: Date, until: Date): Promise<'claimed' | 'in_flight' | undefined>
  /** Ends the claim `token` holds (nothing when it was taken over or the endpoint removed). */
  releasePing(id: bigint, token: string): Promise<void>

  /**
   * Leases to `owner` at most `limit` of the endpoints leasePass(now, leaseMs) allows: enabled, due
   * (`nextAttemptAt` null or past), not leased (or whose lease expired: one `owner` holds is not
   * leased to it again either), and behind the head of the feed. One statement per call; two owners
   * never hold one endpoint. Its secrets are those signing at `now` (signingSecretsAt).
   */
  lease(owner: string, now: Date, leaseMs: number, limit: number): Promise<WebhookLease[]>
  /** Extends a lease held (renewLease); false when it was lost (expired and taken, or the endpoint removed or disabled). */
  renew(lease: WebhookLease, now: Date, leaseMs: number): Promise<boolean>
  /**
   * Ends a lease held (no-op when lost). Its end is kept as the lease's time, so that the endpoints
   * released longest ago are leased first: endpoints take turns.
   */
  release(lease: WebhookLease): Promise<void>
  /** Whether the lease is still held and the endpoint unchanged since it (a read). */
  unchanged(lease: WebhookLease): Promise<boolean>
  /**
   * At most `limit` events of the lease's types after its position (read as one snapshot), each with
   * the trace context its write kept, if any (DeliveryEvent).
   */
  next(lease: WebhookLease, limit: number): Promise<NextEvents>
  /**
   * The event at `position` got a 2xx (or, with `attempt` null, there was none of its types up to
   * `position`): the position moves to it, failure and retry are cleared, the attempt is recorded
   * (trimsAttempts). False, and nothing written, when the lease was lost or a replay moved the
   * position since the lease's (every write under a lease checks both). On success the lease is
   * moved on (advanceLease), so that `next(lease)` reads on from there, and `lease.changed` says
   * whether the endpoint was changed since the lease (the delivery just made was the last under it).
   */
  advance(lease: WebhookLease, position: bigint, attempt: WebhookAttempt | null): Promise<boolean>
  /**
   * The attempt failed: recorded, and the endpoint as failDelivery makes it (tried again at
   * `retryAt`, or disabled); the lease ends. False, and nothing written, when the lease was lost.
   */
  fail(lease: WebhookLease, attempt: WebhookAttempt, next: AfterFailure): Promise<boolean>
  /** Disables it (e.g. `events_expired`) under its lease, which ends. */
  disable(lease: WebhookLease, reason: WebhookDisabledReason): Promise<boolean>
  /**
   * Every enabled endpoint's lag: positions given out after its position, events of any type (for
   * the metrics). Read from positions, never by counting events, so it costs the same at any
   * backlog; a position skipped by a rolled-back write counts too.
   */
  lag(): Promise<{ id: bigint; events: bigint }[]>
  /** Erases every previous secret whose signing window ended at or before `now` (signingSecretsAt's complement); how many. */
  forgetPreviousSecrets(now: Date): Promise<number>
}
