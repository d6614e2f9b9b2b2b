import type Database from 'better-sqlite3'
import { checkCursor } from '../../domain/order-events.js'
import {
  advanceLease,
  ATTEMPTS_KEPT,
  disabled,
  failDelivery,
  heldBy,
  leasePass,
  patchEndpoint,
  renewLease,
  replayEndpoint,
  rotateSecret,
  signingSecretsAt,
  trimsAttempts,
  type AfterFailure,
  type EndpointChange,
  type EndpointState,
  type NewWebhookEndpoint,
  type NextEvents,
  type WebhookAttempt,
  type WebhookDisabledReason,
  type WebhookEndpoint,
  type WebhookEndpointPatch,
  type WebhookLease,
} from '../../domain/webhooks.js'
import { feedHead, NEXT_SCAN, toAttempt, toEndpoint, toLeases, toNextEvents, type AttemptRow, type EndpointRow, type LeasedRow, type NextRow } from '../webhook-rows.js'
import type { WebhooksRepository } from '../webhooks.js'
import { GroupCommit } from '../group-commit.js'
import { classified, statement, type SqliteDatabase } from './database.js'

const ENDPOINT_COLUMNS = 'id, url, event_types, description, enabled, disabled_reason, position, failing_since, next_attempt_at, created_at'
const LEASE_COLUMNS = `${ENDPOINT_COLUMNS}, failures, revision, secret, previous_secret, previous_until, lease_until`

const HEAD = feedHead('max')

// leasePass's endpoints (due, free, behind the head), by its parameters; the least recently leased first
// (a release keeps its time), so that endpoints take turns when more are due than a dispatcher serves.
const LEASE = `
  UPDATE webhook_endpoints SET lease_owner = @owner, lease_until = @until
  WHERE id IN (
    SELECT id FROM webhook_endpoints
    WHERE enabled = 1 AND (next_attempt_at IS NULL OR next_attempt_at <= @asOf) AND (lease_until IS NULL OR lease_until <= @asOf)
      AND position < ${HEAD}
    ORDER BY lease_until, id LIMIT @limit)
  RETURNING ${LEASE_COLUMNS}`

// One statement, hence one snapshot: the retention bound, how far the scan went, and the matching
// events with their writes' trace contexts (the summary row, its position null, sorts first).
const NEXT = `
  WITH scanned AS (SELECT position, type, occurred_at, body, traceparent, tracestate FROM order_events
                   WHERE position > @after ORDER BY position LIMIT @scan),
    matching AS (SELECT position, type, occurred_at, body, traceparent, tracestate FROM scanned
                 WHERE type IN (SELECT value FROM json_each(@types)) ORDER BY position LIMIT @limit)
  SELECT NULL AS position, NULL AS type, NULL AS occurred_at, NULL AS body, NULL AS traceparent, NULL AS tracestate,
    (SELECT pruned_through FROM event_retention WHERE id = 1) AS pruned_through,
    (SELECT max(position) FROM scanned) AS scanned_through
  UNION ALL
  SELECT position, type, occurred_at, body, traceparent, tracestate, NULL, NULL FROM matching
  ORDER BY position`

// Every write under a lease: heldBy's condition, by its parameters.
const HELD = 'id = ? AND lease_owner = ? AND lease_until > ? AND position = ?'

// A claim whose time is over is taken over; a live one is left as it is (no row returned).
const CLAIM_PING = `
  INSERT INTO webhook_ping_claims (endpoint_id, token, claimed_until) VALUES (@id, @token, @until)
  ON CONFLICT (endpoint_id) DO UPDATE SET token = excluded.token, claimed_until = excluded.claimed_until
    WHERE webhook_ping_claims.claimed_until <= @now
  RETURNING endpoint_id`

const INSERT_ATTEMPT = `INSERT INTO webhook_attempts (endpoint_id, event_position, attempted_at, status, error, duration_ms)
  VALUES (?, ?, ?, ?, ?, ?)`
const TRIM_ATTEMPTS = `DELETE FROM webhook_attempts WHERE endpoint_id = @id AND id <= (
  SELECT id FROM webhook_attempts WHERE endpoint_id = @id ORDER BY id DESC LIMIT 1 OFFSET ${ATTEMPTS_KEPT})`

interface QueuedAdvance {
  lease: WebhookLease
  position: bigint
  attempt: WebhookAttempt | null
}

export class SqliteWebhooksRepository implements WebhooksRepository {
  /** Advances waiting for their group commit (see advance). */
  private readonly advances = new GroupCommit<QueuedAdvance, boolean>({ commit: (queued) => this.commitAdvances(queued) })

  constructor(private readonly database: SqliteDatabase) {}

  /** A statement prepared once (the dispatcher runs a few of them all the time). */
  private statement(sql: string): Database.Statement {
    return statement(this.database.db, sql)
  }

  async create(endpoint: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | 'too_many'> {
    // The write transaction is exclusive: the count and the head are exact at its commit.
    return this.database.immediate(() => {
      const count = this.statement('SELECT count(*) FROM webhook_endpoints').pluck().get() as bigint
      if (count >= BigInt(maxEndpoints)) return 'too_many'
      const row = this.statement(
        `INSERT INTO webhook_endpoints (url, event_types, description, position, created_at, secret)
         VALUES (?, ?, ?, ${HEAD}, ?, ?) RETURNING ${ENDPOINT_COLUMNS}`,
      ).get(endpoint.url, endpoint.eventTypes.join(','), endpoint.description, new Date().toISOString(), endpoint.secret) as EndpointRow
      return toEndpoint(row)
    })
  }

  async list(): Promise<WebhookEndpoint[]> {
    return classified(() => (this.statement(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY id`).all() as EndpointRow[]).map(toEndpoint))
  }

  async find(id: bigint): Promise<WebhookEndpoint | undefined> {
    const row = classified(() => this.statement(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?`).get(id) as EndpointRow | undefined)
    return row === undefined ? undefined : toEndpoint(row)
  }

  async update(id: bigint, patch: WebhookEndpointPatch): Promise<WebhookEndpoint | undefined> {
    const row = this.database.immediate(() => this.change(id, (state) => patchEndpoint(state, patch)))
    return row === undefined ? undefined : toEndpoint(row)
  }

  /** In a write transaction: the endpoint as `decide` makes it (undefined: no such endpoint). */
  private change(id: bigint, decide: (state: EndpointState) => EndpointChange): EndpointRow | undefined {
    const row = this.statement(`SELECT ${ENDPOINT_COLUMNS}, failures FROM webhook_endpoints WHERE id = ?`).get(id) as
      | (EndpointRow & { failures: bigint })
      | undefined
    if (row === undefined) return undefined
    const { state, movesRevision } = decide({ ...toEndpoint(row), failures: Number(row.failures) })
    return this.statement(
      `UPDATE webhook_endpoints SET url = @url, event_types = @types, description = @description, enabled = @enabled,
         disabled_reason = @disabledReason, position = @position, failures = @failures, failing_since = @failingSince,
         next_attempt_at = @nextAttemptAt, revision = revision + @moves
       WHERE id = @id RETURNING ${ENDPOINT_COLUMNS}`,
    ).get({ ...state, id, types: state.eventTypes.join(','), enabled: state.enabled ? 1 : 0, moves: movesRevision ? 1 : 0 }) as EndpointRow
  }

  async remove(id: bigint): Promise<boolean> {
    // Its attempts go with it (ON DELETE CASCADE).
    return this.database.immediate(() => this.statement('DELETE FROM webhook_endpoints WHERE id = ?').run(id).changes > 0)
  }

  async rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<boolean> {
    // The write transaction is exclusive: the secret read is the one replaced.
    return this.database.immediate(() => {
      const current = this.statement('SELECT secret FROM webhook_endpoints WHERE id = ?').pluck().get(id) as string | undefined
      if (current === undefined) return false
      const secrets = rotateSecret(current, secret, previousUntil)
      this.statement('UPDATE webhook_endpoints SET secret = ?, previous_secret = ?, previous_until = ?, revision = revision + 1 WHERE id = ?').run(
        secrets.current,
        secrets.previous,
        secrets.previousUntil,
        id,
      )
      return true
    })
  }

  async replay(id: bigint, after: bigint): Promise<WebhookEndpoint | undefined> {
    const row = this.database.immediate(() =>
      this.change(id, (state) => {
        const [prunedThrough, newest] = this.statement(
          'SELECT (SELECT pruned_through FROM event_retention WHERE id = 1), (SELECT max(position) FROM order_events)',
        )
          .raw(true)
          .get() as [bigint, bigint | null]
        checkCursor(after, prunedThrough, newest)
        return replayEndpoint(state, after)
      }),
    )
    return row === undefined ? undefined : toEndpoint(row)
  }

  async attempts(id: bigint, limit: number): Promise<WebhookAttempt[] | undefined> {
    return classified(() => {
      // Back to back on this connection: only another process's remove can come between (no attempts then).
      if (this.statement('SELECT 1 FROM webhook_endpoints WHERE id = ?').pluck().get(id) === undefined) return undefined
      const rows = this.statement(
        `SELECT event_position, attempted_at, status, error, duration_ms FROM webhook_attempts
         WHERE endpoint_id = ? ORDER BY id DESC LIMIT ?`,
      ).all(id, Math.min(limit, ATTEMPTS_KEPT)) as AttemptRow[]
      return rows.map(toAttempt)
    })
  }

  async lease(owner: string, now: Date, leaseMs: number, limit: number): Promise<WebhookLease[]> {
    const { until, asOf } = leasePass(now, leaseMs)
    const rows = this.database.immediate(() => this.statement(LEASE).all({ owner, until: until.toISOString(), asOf, limit }) as LeasedRow[])
    return toLeases(rows, owner, until, now)
  }

  async renew(lease: WebhookLease, now: Date, leaseMs: number): Promise<boolean> {
    const { liveAfter, until } = renewLease(now, leaseMs)
    const done = this.database.immediate(
      () =>
        this.statement('UPDATE webhook_endpoints SET lease_until = ? WHERE id = ? AND lease_owner = ? AND lease_until > ? AND enabled = 1').run(
          until.toISOString(),
          lease.endpoint.id,
          lease.owner,
          liveAfter,
        ).changes > 0,
    )
    if (done) lease.leaseUntil = until
    return done
  }

  async release(lease: WebhookLease): Promise<void> {
    const now = new Date().toISOString()
    this.database.immediate(() =>
      this.statement('UPDATE webhook_endpoints SET lease_owner = NULL, lease_until = ? WHERE id = ? AND lease_owner = ?').run(
        now,
        lease.endpoint.id,
        lease.owner,
      ),
    )
  }

  async unchanged(lease: WebhookLease): Promise<boolean> {
    const revision = classified(
      () =>
        this.statement('SELECT revision FROM webhook_endpoints WHERE id = ? AND lease_owner = ? AND lease_until > ?')
          .pluck()
          .get(lease.endpoint.id, lease.owner, new Date().toISOString()) as bigint | undefined,
    )
    return revision === BigInt(lease.revision)
  }

  async next(lease: WebhookLease, limit: number): Promise<NextEvents> {
    const after = lease.endpoint.position
    const rows = classified(
      () => this.statement(NEXT).all({ after, scan: Math.max(limit, NEXT_SCAN), types: JSON.stringify(lease.endpoint.eventTypes), limit }) as NextRow[],
    )
    return toNextEvents(after, limit, rows)
  }

  /**
   * Group-committed (../group-commit.ts) with the other advances of the same turn of the event loop
   * (the endpoints whose 2xx came together), in one transaction that does not wait for its sync
   * (synchronous=NORMAL: durable when this process crashes, not on power loss). Each advance is
   * still its own conditional statements with its own result; a transaction that fails rejects
   * them all, and none is written. A position is only ever written after its event's 2xx, so one
   * lost to a power loss moves an endpoint back: its events are sent again (at least once), none is
   * skipped. A sync per event would bound an endpoint to a few hundred events a second.
   */
  advance(lease: WebhookLease, position: bigint, attempt: WebhookAttempt | null): Promise<boolean> {
    return this.advances.submit({ lease, position, attempt })
  }

  /** Settles the advances queued for their group commit: the store closes the connection after. */
  drain(): Promise<void> {
    return this.advances.drain()
  }

  private commitAdvances(queued: QueuedAdvance[]): boolean[] {
    let results: (bigint | undefined)[]
    try {
      this.database.db.pragma('synchronous = NORMAL')
      results = this.database.immediate(() => queued.map(({ lease, position, attempt }) => this.advanceHeld(lease, position, attempt)))
    } finally {
      // Every other write of this connection syncs (database.ts).
      this.database.db.pragma('synchronous = FULL')
    }
    return queued.map(({ lease, position }, i) => {
      const revision = results[i]
      if (revision !== undefined) advanceLease(lease, position, Number(revision))
      return revision !== undefined
    })
  }

  /** One advance's statements, in the transaction of commitAdvances: the endpoint's revision, undefined when not held. */
  private advanceHeld(lease: WebhookLease, position: bigint, attempt: WebhookAttempt | null): bigint | undefined {
    // Not UPDATE … RETURNING: with foreign keys on, SQLite's RETURNING on this parent table cost
    // ~15 µs a statement, several times the UPDATE; the row just written is read back instead.
    const changes = this.statement(
      `UPDATE webhook_endpoints SET position = ?, failures = 0, failing_since = NULL, next_attempt_at = NULL WHERE ${HELD}`,
    ).run(position, ...this.held(lease)).changes
    if (changes === 0) return undefined
    const revision = this.statement('SELECT revision FROM webhook_endpoints WHERE id = ?').pluck().get(lease.endpoint.id) as bigint
    if (attempt !== null) this.record(lease.endpoint.id, attempt, trimsAttempts(lease.endpoint.position, position))
    return revision
  }

  async fail(lease: WebhookLease, attempt: WebhookAttempt, next: AfterFailure): Promise<boolean> {
    // The write transaction is exclusive: the row read is the row written.
    return this.database.immediate(() => {
      const row = this.statement(`SELECT ${ENDPOINT_COLUMNS}, failures FROM webhook_endpoints WHERE ${HELD}`).get(...this.held(lease)) as
        | (EndpointRow & { failures: bigint })
        | undefined
      if (row === undefined) return false
      const state = failDelivery({ ...toEndpoint(row), failures: Number(row.failures) }, attempt.attemptedAt, next)
      this.statement(
        `UPDATE webhook_endpoints SET failures = ?, failing_since = ?, next_attempt_at = ?, enabled = ?, disabled_reason = ?,
           lease_owner = NULL, lease_until = NULL
         WHERE id = ?`,
      ).run(state.failures, state.failingSince, state.nextAttemptAt, state.enabled ? 1 : 0, state.disabledReason, lease.endpoint.id)
      this.record(lease.endpoint.id, attempt, true)
      return true
    })
  }

  async disable(lease: WebhookLease, reason: WebhookDisabledReason): Promise<boolean> {
    const { enabled, disabledReason, nextAttemptAt } = disabled(reason)
    return this.database.immediate(
      () =>
        this.statement(
          `UPDATE webhook_endpoints SET enabled = ?, disabled_reason = ?, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL WHERE ${HELD}`,
        ).run(enabled ? 1 : 0, disabledReason, nextAttemptAt, ...this.held(lease)).changes > 0,
    )
  }

  async lag(): Promise<{ id: bigint; events: bigint }[]> {
    return classified(
      () =>
        this.statement(`SELECT id, max(${HEAD} - position, 0) AS events FROM webhook_endpoints WHERE enabled = 1 ORDER BY id`).all() as {
          id: bigint
          events: bigint
        }[],
    )
  }

  async forgetPreviousSecrets(now: Date): Promise<number> {
    // Those signingSecretsAt no longer signs with: their window ended at or before now.
    const forget = 'UPDATE webhook_endpoints SET previous_secret = NULL, previous_until = NULL WHERE previous_until <= ?'
    return this.database.immediate(() => this.statement(forget).run(now.toISOString()).changes)
  }

  /** HELD's parameters for a lease, now (heldBy). */
  private held(lease: WebhookLease): [bigint, string, string, bigint] {
    const { id, owner, liveAfter, position } = heldBy(lease, new Date())
    return [id, owner, liveAfter, position]
  }

  /** Records an attempt and, when `trim`, deletes the endpoint's attempts older than the last ATTEMPTS_KEPT. */
  private record(endpointId: bigint, attempt: WebhookAttempt, trim: boolean): void {
    this.statement(INSERT_ATTEMPT).run(endpointId, attempt.eventId, attempt.attemptedAt, attempt.status, attempt.error, Math.round(attempt.durationMs))
    if (trim) this.statement(TRIM_ATTEMPTS).run({ id: endpointId })
  }

  async signingSecrets(id: bigint, now: Date): ReturnType<WebhooksRepository['signingSecrets']> {
    const row = classified(
      () =>
        this.statement('SELECT secret, previous_secret, previous_until FROM webhook_endpoints WHERE id = ?').get(id) as
          | Pick<LeasedRow, 'secret' | 'previous_secret' | 'previous_until'>
          | undefined,
    )
    return row === undefined ? undefined : signingSecretsAt(row.secret, row.previous_secret, row.previous_until, now)
  }

  async claimPing(id: bigint, token: string, now: Date, until: Date): Promise<'claimed' | 'in_flight' | undefined> {
    // The write transaction is exclusive: the endpoint cannot go between the check and the claim.
    return this.database.immediate(() => {
      if (this.statement('SELECT 1 FROM webhook_endpoints WHERE id = ?').get(id) === undefined) return undefined
      const claimed = this.statement(CLAIM_PING).get({ id, token, until: until.toISOString(), now: now.toISOString() })
      return claimed === undefined ? 'in_flight' : 'claimed'
    })
  }

  async releasePing(id: bigint, token: string): Promise<void> {
    this.database.immediate(() => this.statement('DELETE FROM webhook_ping_claims WHERE endpoint_id = ? AND token = ?').run(id, token))
  }
}
