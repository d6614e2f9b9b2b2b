import { randomUUID } from 'node:crypto'
import { setMaxListeners } from 'node:events'
import type { WebhookAttempt, WebhookDisabledReason, WebhookLease } from '../domain/webhooks.js'
import type { MaybePromise } from '../maybe-async.js'
import type { OutageLog } from '../outage-log.js'
import { StoreUnavailableError } from '../store/store.js'
import type { WebhooksRepository } from '../store/webhooks.js'
import type { DeliveryRequest, DeliveryResult } from './delivery.js'
import { DeliverySlots } from './delivery-slots.js'
import { traceDelivery } from './delivery-span.js'
import { EndpointLoops, type EndpointLoop } from './endpoint-loops.js'
import { afterFailure } from './retry-schedule.js'
import { deliveryBody, deliveryHeaders } from './signing.js'
import { retryWhileUnavailable as persist } from './store-retry.js'

interface DispatcherLog {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
}

interface DispatcherMetrics {
  delivered(result: DeliveryResult): void
}

export interface DispatcherOptions {
  webhooks: WebhooksRepository
  /** Moves with every commit that writes events (`store.orders.dataVersion()`). */
  dataVersion: () => MaybePromise<bigint>
  deliver: (request: DeliveryRequest, signal: AbortSignal) => Promise<DeliveryResult>
  timeoutMs: number
  retryScheduleMs: readonly number[]
  log: DispatcherLog
  /**
   * Where a pass that failed because the database is unavailable is said, with the requests' own
   * failures (one warning a minute at most, and one line when it answers again); without it, here.
   */
  databaseOutage?: Pick<OutageLog, 'failed' | 'succeeded'> | undefined
  metrics?: DispatcherMetrics | undefined
  /** Delivery slots of this instance: endpoints served at once (a parked attempt holds none). */
  maxInFlight?: number
  /** How long a loop serves its endpoint before it gives its slot back (a turn). */
  turnMs?: number
  /** How often the data version is read (a cheap read on both stores). */
  pollIntervalMs?: number
  /** How often due endpoints are looked for without a new event (retries that came due). */
  sweepIntervalMs?: number
  /** Awaited before each delivery, when it returns a promise: the API's share of a busy instance (pacer.ts). */
  pace?: () => Promise<void> | undefined
  /** Events read from the feed at a time for one endpoint. */
  batch?: number
  now?: () => Date
}

const MAX_IN_FLIGHT = 100
const TURN_MS = 1000
const DISPATCH_POLL_MS = 100
const SWEEP_INTERVAL_MS = 1000
const BATCH = 100

/** A lease outlives the attempt it covers: an attempt starts only with `timeoutMs` + this left. */
const LEASE_MARGIN_MS = 2000

/**
 * Pushes the event feed to the webhook endpoints (docs/webhooks.md), on every instance that serves.
 *
 * Endpoints are taken through leases in the database, so instances share them and at most one
 * delivery per endpoint is in flight anywhere. Each leased endpoint gets its own async loop that
 * delivers its events strictly in order, one at a time, moving its position after each 2xx; no loop
 * waits for another. A loop ends when the endpoint is caught up (lease released), failing (retry
 * scheduled, lease ended by `fail`), disabled, changed, or its lease is lost (another instance took
 * it: every write is conditional on the lease, so it changes nothing). New endpoints are leased when
 * the data version moves (read every 100 ms, as the long poll does) and at least every second, for
 * retries that came due.
 *
 * Slots (delivery-slots.ts): an instance serves at most `maxInFlight` endpoints at once, in turns of
 * `turnMs`. A loop whose turn ends while endpoints wait releases its lease, and the endpoints
 * released longest ago are leased first; an attempt in flight then is parked (it gives its slot back,
 * keeps its lease, and its result is written as usual). Loops are launched and relaunched by
 * endpoint-loops.ts; store calls are tried again while the store is briefly unavailable
 * (store-retry.ts).
 *
 * Changes: every write under a lease reports whether the endpoint changed since it was leased (its
 * revision: a PATCH of url, types or enabled, a rotation, a replay); the loop then ends and the
 * endpoint is leased anew with what it is now, so at most the delivery in flight goes the old way.
 * A delivery that waited for the pacer first checks again that the endpoint is unchanged.
 *
 * A lease lasts 2 × WEBHOOK_TIMEOUT_MS + 5 s and is renewed before an attempt when less than the
 * timeout (+ 2 s) is left, so an attempt always ends before its lease can expire and be taken. Leases
 * are timed by each instance's clock: instances sharing a database need clocks within a second.
 */
export class WebhookDispatcher {
  readonly owner = randomUUID()
  private readonly abort = new AbortController()
  private readonly slots: DeliverySlots
  private readonly loops: EndpointLoops
  private readonly leaseMs: number
  private readonly now: () => Date
  private timer: NodeJS.Timeout | undefined
  /** The tick in progress: stop() waits for it, so none touches the store once stop() has resolved. */
  private ticking: Promise<void> | undefined
  private version: bigint | undefined
  private lastSweep = 0
  /** Set when a loop ended with more to do, or a lease pass was full: lease again at the next tick. */
  private rescan = false
  /** By endpoint, a lease pass at the retry this instance scheduled: it is tried then, not at the next sweep. */
  private readonly retries = new Map<bigint, NodeJS.Timeout>()
  private failing = false
  private stopping = false

  constructor(private readonly options: DispatcherOptions) {
    this.slots = new DeliverySlots({
      max: options.maxInFlight ?? MAX_IN_FLIGHT,
      turnMs: options.turnMs ?? TURN_MS,
      waiting: () => this.rescan,
      // When endpoints wait for a slot (the last pass was full, or one was handed back), a lease pass follows at once.
      freed: () => {
        if (this.rescan && !this.stopping) setImmediate(() => void this.tick())
      },
    })
    this.loops = new EndpointLoops(this.slots, (lease, loop, recheck) =>
      this.serve(lease, loop, recheck).catch((error: unknown) => {
        this.options.log.warn({ err: error, endpointId: lease.endpoint.id.toString() }, 'webhook delivery failed; the endpoint is tried again')
        return this.release(loop, lease).catch(() => {})
      }),
    )
    this.leaseMs = 2 * options.timeoutMs + 5000
    this.now = options.now ?? (() => new Date())
    // Every attempt in flight listens for shutdown on this one signal: as many as there are loops.
    setMaxListeners(0, this.abort.signal)
  }

  /** Endpoints being delivered to by this instance now, parked attempts included. */
  get inFlight(): number {
    return this.loops.size
  }

  /** Slots taken now: endpoints being served, parked attempts not included. */
  get slotsInUse(): number {
    return this.slots.inUse
  }

  start(): void {
    if (this.timer !== undefined || this.stopping) return
    this.timer = setInterval(() => void this.tick(), this.options.pollIntervalMs ?? DISPATCH_POLL_MS)
    void this.tick()
  }

  /**
   * Starts no more attempts; waits up to `graceMs` for those in flight, then aborts them (their
   * event is sent again later, with the same webhook-id); every lease held is released.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true
    clearInterval(this.timer)
    for (const retry of this.retries.values()) clearTimeout(retry)
    let timer: NodeJS.Timeout | undefined
    const graceOver = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))
    // A lease pass under way may still start loops, and an ending loop may be followed by a new
    // one (they see `stopping` and release at once): all are waited for, so that no lease is left
    // to expire and nothing touches the store once stop() has resolved.
    const settled = async (): Promise<void> => {
      await this.ticking
      await this.loops.settled()
    }
    await Promise.race([settled(), graceOver])
    clearTimeout(timer)
    this.abort.abort()
    await settled()
  }

  private tick(): Promise<void> {
    if (this.ticking === undefined && !this.stopping) this.ticking = this.leasePass().finally(() => (this.ticking = undefined))
    return this.ticking ?? Promise.resolve()
  }

  private async leasePass(): Promise<void> {
    try {
      const version = await this.options.dataVersion()
      if (this.stopping) return // stop() began while the version was read: take no new lease
      const moved = version !== this.version
      this.version = version
      const now = Date.now()
      const sweep = now - this.lastSweep >= (this.options.sweepIntervalMs ?? SWEEP_INTERVAL_MS)
      if (moved || this.rescan || sweep) {
        if (sweep) {
          this.lastSweep = now
          // A previous secret is erased once its signing window is over (no lease reads it then).
          await this.options.webhooks.forgetPreviousSecrets(this.now())
          if (this.stopping) return
        }
        this.rescan = false
        await this.leaseMore()
      }
      if (this.failing) this.options.log.info({}, 'webhook dispatch resumed')
      this.failing = false
      this.options.databaseOutage?.succeeded()
    } catch (error) {
      if (error instanceof StoreUnavailableError && this.options.databaseOutage !== undefined) return this.options.databaseOutage.failed(error)
      if (!this.failing) this.options.log.warn({ err: error }, 'webhook dispatch failed; it tries again')
      this.failing = true
    }
  }

  private async leaseMore(): Promise<void> {
    const free = this.slots.free
    if (free <= 0) {
      this.rescan = true
      return
    }
    const leases = await this.options.webhooks.lease(this.owner, this.now(), this.leaseMs, free)
    if (leases.length === free) this.rescan = true
    for (const lease of leases) this.loops.leased(lease)
  }

  /** Delivers the leased endpoint's events in order until it is caught up, failing, or the lease is lost. */
  private async serve(lease: WebhookLease, loop: EndpointLoop, recheck: boolean): Promise<void> {
    const { webhooks } = this.options
    const endpointId = lease.endpoint.id.toString()
    if (recheck && !(await this.holdLease(lease, true))) return

    for (;;) {
      if (this.stopping || !(await this.holdLease(lease))) break
      if (this.slots.turnOver(loop)) return this.handBack(loop, lease)
      loop.woken = false
      const seen = this.version
      const next = await persist(() => webhooks.next(lease, this.options.batch ?? BATCH))
      if (next === 'expired') {
        if (await this.endLease(loop, () => webhooks.disable(lease, 'events_expired'))) this.logDisabled(endpointId, 'events_expired')
        return
      }
      for (const event of next.events) {
        if (this.stopping || this.slots.turnOver(loop)) return this.handBack(loop, lease)
        const paced = this.options.pace?.()
        if (paced !== undefined) {
          await paced
          // The wait may have been long: a change made meanwhile holds for this delivery already.
          if (!(await persist(() => webhooks.unchanged(lease)))) return this.handBack(loop, lease)
        }
        if (this.stopping || !(await this.holdLease(lease))) return this.handBack(loop, lease)
        const body = deliveryBody(event)
        const attemptedAt = this.now()
        const { url } = lease.endpoint
        const eventId = event.position.toString()
        const signed = deliveryHeaders(lease.secrets, eventId, body, attemptedAt)
        // In the trace of the write that recorded the event; retries and replays alike.
        const delivery = { name: 'webhook delivery', url, endpointId: lease.endpoint.id, eventId, parent: event.trace ?? null }
        const { result, within } = await traceDelivery(delivery, (traceHeaders) =>
          this.slots.attempt(loop, this.options.deliver({ url, body, headers: { ...signed, ...traceHeaders } }, this.abort.signal)),
        )
        // Shut down mid-attempt: nothing is recorded, the event is sent again by whoever leases next.
        if (result.outcome === 'aborted') return this.release(loop, lease)
        this.options.metrics?.delivered(result)
        const attempt: WebhookAttempt = {
          eventId: event.position,
          attemptedAt: attemptedAt.toISOString(),
          status: result.status,
          error: result.error,
          durationMs: result.durationMs,
        }
        // An advance moves the lease on with the endpoint (advanceLease): `next` reads on from there.
        if (result.outcome === 'success') {
          if (!(await persist(() => webhooks.advance(lease, event.position, attempt))) || lease.changed) return this.handBack(loop, lease)
          continue
        }
        if (result.outcome === 'gone') return within(() => this.disable(loop, lease, attempt, 'endpoint_gone'))
        return within(() => this.failed(loop, lease, attempt, result))
      }
      // The rest of what was read had none of its types: skipped past at once.
      if (next.through > lease.endpoint.position) {
        if (!(await persist(() => webhooks.advance(lease, next.through, null))) || lease.changed) return this.handBack(loop, lease)
        continue
      }
      if (next.events.length > 0) continue
      // Caught up, unless an event committed since the read (the version moved, or the endpoint
      // was found due again meanwhile): then read again rather than wait for the next lease pass.
      if (loop.woken || this.version !== seen) continue
      break
    }
    const seen = this.version
    await this.release(loop, lease)
    // A lease pass while it was being released did not see it: the next pass looks again.
    if (this.version !== seen) this.rescan = true
  }

  /**
   * Whether the lease holds for an attempt: renewed when less than the timeout (+ margin) is left,
   * or whatever is left when `renew` (a relaunched loop's lease). A renewal moves `leaseUntil`.
   */
  private async holdLease(lease: WebhookLease, renew = false): Promise<boolean> {
    const now = this.now()
    if (!renew && lease.leaseUntil.getTime() - now.getTime() > this.options.timeoutMs + LEASE_MARGIN_MS) return true
    return persist(() => this.options.webhooks.renew(lease, now, this.leaseMs))
  }

  private async failed(loop: EndpointLoop, lease: WebhookLease, attempt: WebhookAttempt, result: DeliveryResult): Promise<void> {
    const next = afterFailure(lease.failures, this.options.retryScheduleMs, result.retryAfter, this.now())
    if ('disable' in next) return this.disable(loop, lease, attempt, next.disable)
    const { retryAt } = next
    if (!(await this.endLease(loop, () => this.options.webhooks.fail(lease, attempt, { retryAt })))) return
    this.leaseAgainAt(lease.endpoint.id, retryAt)
    if (lease.failures === 0) {
      this.options.log.warn(
        { endpointId: lease.endpoint.id.toString(), eventId: attempt.eventId.toString(), status: attempt.status, error: attempt.error, retryAt: retryAt.toISOString() },
        'webhook endpoint failing',
      )
    }
  }

  /**
   * A lease pass once `at` has come (the endpoint's retry), so that a retry is sent at its time, not
   * up to a sweep later. Whichever instance leases it then sends it; another instance's sweep may.
   */
  private leaseAgainAt(endpointId: bigint, at: Date): void {
    if (this.stopping) return
    clearTimeout(this.retries.get(endpointId))
    // A millisecond past it, so that the lease finds it due; a timer holds at most 2^31 - 1 ms.
    const delay = Math.min(Math.max(0, at.getTime() - this.now().getTime() + 1), 2 ** 31 - 1)
    const timer = setTimeout(() => {
      this.retries.delete(endpointId)
      this.rescan = true
      void this.tick()
    }, delay)
    this.retries.set(endpointId, timer.unref())
  }

  private async disable(loop: EndpointLoop, lease: WebhookLease, attempt: WebhookAttempt, reason: WebhookDisabledReason): Promise<void> {
    if (await this.endLease(loop, () => this.options.webhooks.fail(lease, attempt, { disable: reason }))) this.logDisabled(lease.endpoint.id.toString(), reason, attempt)
  }

  private logDisabled(endpointId: string, reason: WebhookDisabledReason, attempt?: WebhookAttempt): void {
    const fields = attempt === undefined ? {} : { eventId: attempt.eventId.toString(), status: attempt.status, error: attempt.error }
    this.options.log.warn({ endpointId, reason, ...fields }, 'webhook endpoint disabled')
  }

  private async release(loop: EndpointLoop, lease: WebhookLease): Promise<void> {
    await this.endLease(loop, () => this.options.webhooks.release(lease))
  }

  /** The loop's lease ended by `write` (a release, a failure, a disable): from now on a lease of its endpoint is a new loop's. */
  private endLease<T>(loop: EndpointLoop, write: () => Promise<T>): Promise<T> {
    loop.finishing = true
    return persist(write)
  }

  /**
   * Released with work left (its turn is over, it changed since its lease, a replay moved it): back
   * in line, and the lease pass that follows its slot's return leases it again, as it now is.
   */
  private async handBack(loop: EndpointLoop, lease: WebhookLease): Promise<void> {
    await this.release(loop, lease)
    this.rescan = true
  }
}
