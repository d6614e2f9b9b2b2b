import { randomBytes } from 'node:crypto'
import type { TraceContext } from '../trace-context.js'
import { canonicalEventTypes, type OrderEventType } from './order-events.js'

/**
 * Webhook endpoints' values and rules (docs/webhooks.md), for both stores, the dispatcher, the API
 * and the CLI: the stores keep the rows and the SQL, these rules decide what a change makes of them.
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
  /** Canonical already (canonicalEventTypes, applied by createWebhookEndpoint): a store writes them as given. */
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
  /** Until when it is held: set by the lease and by each renewal, the one record of it. */
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

/**
 * A feed event as a delivery reads it: with the W3C trace context of the write that recorded it,
 * when that write was traced, so that its deliveries can join that trace. For headers only: the
 * body (deliveryBody) is the feed's event, byte for byte.
 */
export interface DeliveryEvent extends FeedEvent {
  trace?: TraceContext
}

/** What follows a leased endpoint's position in the feed. */
export type NextEvents =
  /** The next events of its types, ascending (may be empty); `through`: the last position read, matching or not. */
  | { events: DeliveryEvent[]; through: bigint }
  /** Events after its position have been deleted by retention. */
  | 'expired'

/**
 * The attempts shown per endpoint. Older ones are deleted in batches, not one per delivery: an
 * advance deletes them when it moves the position past a multiple of ATTEMPTS_KEPT (so after at
 * most that many attempts), a failure every time; an endpoint stores fewer than 2 × ATTEMPTS_KEPT.
 */
export const ATTEMPTS_KEPT = 100

/** Whether an advance from `from` to `to` deletes the endpoint's older attempts (see ATTEMPTS_KEPT). */
export function trimsAttempts(from: bigint, to: bigint): boolean {
  return from / BigInt(ATTEMPTS_KEPT) !== to / BigInt(ATTEMPTS_KEPT)
}

/** A new signing secret: `whsec_` and the base64 of 32 random bytes (Standard Webhooks' form). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`
}

/** How long the secret before a rotation keeps signing: a receiver has a day to take the new one. */
export const PREVIOUS_SECRET_SIGNS_MS = 24 * 3_600_000

/**
 * The secrets that sign at `now`: the previous one only while its window is open (`previousUntil`
 * after `now`); a store erases it once the window has ended (`previous_until <= now`).
 */
export function signingSecretsAt(current: string, previous: string | null, previousUntil: string | null, now: Date): WebhookSecrets {
  const signs = previous !== null && previousUntil !== null && previousUntil > now.toISOString()
  return { current, previous: signs ? previous : null, previousUntil: signs ? previousUntil : null }
}

/**
 * A rotation from the `current` secret to `secret`: the current one becomes the previous, which
 * also signs until `previousUntil` (the one before it stops at once). A store moves the revision
 * with every rotation: a holder's lease has the secrets it was leased with.
 */
export function rotateSecret(current: string, secret: string, previousUntil: Date): WebhookSecrets {
  return { current: secret, previous: current, previousUntil: previousUntil.toISOString() }
}

/** What a PATCH or a replay changes of an endpoint: its settings, and the failure of its current event. */
export type EndpointState = Pick<
  WebhookEndpoint,
  'url' | 'eventTypes' | 'description' | 'enabled' | 'disabledReason' | 'position' | 'failingSince' | 'nextAttemptAt'
> & { failures: number }

/** An endpoint after a change; when its revision moves, a delivery under an older lease is its last. */
export interface EndpointChange {
  state: EndpointState
  movesRevision: boolean
}

/**
 * What disabling sets, whatever the reason (a request, a failure past the schedule, a gone endpoint,
 * expired events): disabled, with its reason, no retry scheduled; its position and the failure of
 * its current event are kept, for enabling it again. A store writes these under the lease when a
 * delivery disables it.
 */
export function disabled(reason: WebhookDisabledReason): Pick<EndpointState, 'enabled' | 'disabledReason' | 'nextAttemptAt'> {
  return { enabled: false, disabledReason: reason, nextAttemptAt: null }
}

/** What follows a failed attempt (the dispatcher's choice, by the retry schedule): a retry at `retryAt`, or disabling. */
export type AfterFailure = { retryAt: Date } | { disable: WebhookDisabledReason }

/**
 * A delivery's failed attempt (at `attemptedAt`) applied: one more failure of the current event,
 * failing since its first failure; then either tried again at `retryAt`, or disabled (see disabled).
 * The position stays: the event is sent again, or on enabling.
 */
export function failDelivery(current: EndpointState, attemptedAt: string, next: AfterFailure): EndpointState {
  const state: EndpointState = { ...current, failures: current.failures + 1, failingSince: current.failingSince ?? attemptedAt }
  return 'retryAt' in next ? { ...state, nextAttemptAt: next.retryAt.toISOString() } : { ...state, ...disabled(next.disable) }
}

/**
 * A PATCH applied; an empty description is none. Enabling clears what disabled it and, when it was disabled, the failure of its
 * current event (an enabled endpoint keeps its retry schedule); disabling is `disabled_by_request`,
 * with no retry scheduled, at the position it stopped at. The revision moves when what deliveries
 * are changes (where, which events, whether at all), not for a description alone.
 */
export function patchEndpoint(current: EndpointState, patch: WebhookEndpointPatch): EndpointChange {
  const state: EndpointState = {
    ...current,
    url: patch.url ?? current.url,
    eventTypes: patch.eventTypes === undefined ? current.eventTypes : canonicalEventTypes(patch.eventTypes),
    description: patch.description === undefined ? current.description : patch.description === '' ? null : patch.description,
  }
  if (patch.enabled === true) {
    if (!current.enabled) Object.assign(state, { failures: 0, failingSince: null, nextAttemptAt: null })
    Object.assign(state, { enabled: true, disabledReason: null })
  } else if (patch.enabled === false) {
    Object.assign(state, disabled('disabled_by_request'))
  }
  return { state, movesRevision: patch.url !== undefined || patch.eventTypes !== undefined || patch.enabled !== undefined }
}

/**
 * A replay: the position moves to `after` (checked against the feed with checkCursor first), the
 * endpoint is enabled, its failure and retry cleared; it is sent every later event of its types again.
 */
export function replayEndpoint(current: EndpointState, after: bigint): EndpointChange {
  return {
    state: { ...current, position: after, enabled: true, disabledReason: null, failures: 0, failingSince: null, nextAttemptAt: null },
    movesRevision: true,
  }
}

/**
 * A lease pass at `now` (a store's lease statement, which must decide in SQL, atomically, which rows
 * it takes): leased until `until`, `leaseMs` on; an endpoint can be leased when it is enabled, behind
 * the head of the feed, due (no retry scheduled, or one at or before `asOf`) and free (never leased,
 * released, or its lease ended at or before `asOf`, its holder's own included).
 */
export function leasePass(now: Date, leaseMs: number): { until: Date; asOf: string } {
  return { until: new Date(now.getTime() + leaseMs), asOf: now.toISOString() }
}

/**
 * What every write under `lease` at `now` requires of the endpoint's row (HELD, in a store's
 * conditional statement): still leased to its holder, the lease unexpired at `now` (`liveAfter`),
 * and at the position the holder works from (a replay moves it, and the holder's late writes must
 * not undo that). A write that finds no such row changes nothing: the lease was lost.
 */
export function heldBy(lease: WebhookLease, now: Date): { id: bigint; owner: string; liveAfter: string; position: bigint } {
  return { id: lease.endpoint.id, owner: lease.owner, liveAfter: now.toISOString(), position: lease.endpoint.position }
}

/**
 * A lease's renewal at `now` (a store's conditional update): the lease must still be its holder's,
 * unexpired at `now` (`liveAfter`), and the endpoint enabled; it then holds until `until`, which the
 * store sets as the lease's `leaseUntil` once written.
 */
export function renewLease(now: Date, leaseMs: number): { liveAfter: string; until: Date } {
  return { liveAfter: now.toISOString(), until: new Date(now.getTime() + leaseMs) }
}

/**
 * A lease after its `advance` to `position` was written, the endpoint's revision then `revision`:
 * the lease is its holder's view of the endpoint, kept as the store now has it.
 */
export function advanceLease(lease: WebhookLease, position: bigint, revision: number): void {
  Object.assign(lease.endpoint, { position, failingSince: null, nextAttemptAt: null })
  lease.failures = 0
  lease.changed = revision !== lease.revision
}
