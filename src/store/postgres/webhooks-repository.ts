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
import type { PostgresDatabase } from './database.js'
import type { Connection } from './connection.js'
import { utc } from './order-pages.js'
import { int8 } from './parameters.js'
import { WRITE_TIME } from './write-sql.js'

// One statement: whether the endpoint exists, and whether this claim won. A claim whose time is
// over is taken over; a live one is left as it is. Two claims at once: the second waits for the
// first's row, then finds it live (ON CONFLICT re-checks the WHERE on the committed row).
const CLAIM_PING = `
  WITH endpoint AS (SELECT id FROM webhook_endpoints WHERE id = $1),
    claimed AS (
      INSERT INTO webhook_ping_claims (endpoint_id, token, claimed_until) SELECT id, $2, $3 FROM endpoint
      ON CONFLICT (endpoint_id) DO UPDATE SET token = excluded.token, claimed_until = excluded.claimed_until
        WHERE webhook_ping_claims.claimed_until <= $4
      RETURNING endpoint_id)
  SELECT EXISTS (SELECT 1 FROM endpoint) AS found, EXISTS (SELECT 1 FROM claimed) AS claimed`

/** PostgreSQL's foreign_key_violation: here, the endpoint removed while its ping was claimed. */
const FOREIGN_KEY_VIOLATION = '23503'

/** The columns of an endpoint, of `table`'s row. */
const endpointColumns = (table: string): string =>
  `${table}.id, ${table}.url, ${table}.event_types, ${table}.description, ${table}.enabled, ${table}.disabled_reason, ${table}.position,
   ${utc(`${table}.failing_since`)} AS failing_since, ${utc(`${table}.next_attempt_at`)} AS next_attempt_at, ${utc(`${table}.created_at`)} AS created_at`
const ENDPOINT_COLUMNS = endpointColumns('webhook_endpoints')

const HEAD = feedHead('greatest')

// leasePass's endpoints (due, free, behind the head), by its parameters; the least recently leased first
// (a release keeps its time), so that endpoints take turns when more are due than a dispatcher
// serves. SKIP LOCKED:
// instances never wait on each other, and a row another one has just leased is checked again
// against its new lease once its lock is free (READ COMMITTED re-evaluates the WHERE).
const LEASE = `
  WITH due AS (
    SELECT id FROM webhook_endpoints
    WHERE enabled AND (next_attempt_at IS NULL OR next_attempt_at <= $3) AND (lease_until IS NULL OR lease_until <= $3)
      AND position < ${HEAD}
    ORDER BY lease_until NULLS FIRST, id LIMIT $4
    FOR UPDATE SKIP LOCKED
  )
  UPDATE webhook_endpoints AS e SET lease_owner = $1, lease_until = $2 FROM due WHERE e.id = due.id
  RETURNING ${endpointColumns('e')}, e.failures, e.revision, e.secret, e.previous_secret, ${utc('e.previous_until')} AS previous_until`

// One statement, hence one snapshot: the retention bound, how far the scan went, and the matching
// events with their writes' trace contexts (the summary row first). Positions become visible in
// ascending order (write-sql.ts), so the scan never passes one that commits later.
const NEXT = `
  WITH scanned AS (SELECT position, type, occurred_at, body, traceparent, tracestate FROM order_events
                   WHERE position > $1::bigint ORDER BY position LIMIT $2),
    matching AS (SELECT position, type, occurred_at, body, traceparent, tracestate FROM scanned
                 WHERE type = ANY ($3::text[]) ORDER BY position LIMIT $4)
  SELECT NULL::bigint AS position, NULL::text AS type, NULL::text AS occurred_at, NULL::text AS body,
    NULL::text AS traceparent, NULL::text AS tracestate,
    (SELECT pruned_through FROM event_retention WHERE id = 1) AS pruned_through,
    (SELECT max(position) FROM scanned) AS scanned_through
  UNION ALL
  SELECT position, type, ${utc('occurred_at')}, body, traceparent, tracestate, NULL, NULL FROM matching
  ORDER BY position NULLS FIRST`

// Every write under a lease ($1 to $4): heldBy's condition, by its parameters.
const HELD = 'id = $1 AND lease_owner = $2 AND lease_until > $3 AND position = $4::bigint'

/**
 * The attempt ($5 to $9) recorded when `changed` (a CTE of the same statement) changed its endpoint
 * and $5 is not null, and, when `trim` holds (trimsAttempts for an advance), the endpoint's
 * attempts beyond the last ATTEMPTS_KEPT deleted: the statement's snapshot does not hold the new
 * one, so the older ones kept are one fewer.
 */
const recordAttempt = (changed: string, trim: string): string => `
  recorded AS (
    INSERT INTO webhook_attempts (endpoint_id, event_position, attempted_at, status, error, duration_ms)
    SELECT id, $5::bigint, $6::timestamptz, $7::integer, $8::text, $9::integer FROM ${changed} WHERE $5::bigint IS NOT NULL
    RETURNING endpoint_id
  ), trimmed AS (
    DELETE FROM webhook_attempts WHERE ${trim} AND endpoint_id = $1 AND EXISTS (SELECT 1 FROM recorded)
      AND id <= (SELECT id FROM webhook_attempts WHERE endpoint_id = $1 ORDER BY id DESC LIMIT 1 OFFSET ${ATTEMPTS_KEPT - 1})
  )`

// One statement, so one round trip: its implicit transaction commits without waiting for the WAL
// flush (set_config local to that transaction, read by PostgreSQL at its commit).
const ADVANCE = `
  WITH moved AS (
    UPDATE webhook_endpoints SET position = $10::bigint, failures = 0, failing_since = NULL, next_attempt_at = NULL
    WHERE ${HELD} RETURNING id, revision
  ), ${recordAttempt('moved', '$11::boolean')}
  SELECT (SELECT revision FROM moved) AS revision, set_config('synchronous_commit', 'off', true) AS commit_mode`

// The endpoint as failDelivery made it ($10 to $14), in the transaction holding its row since it was read under HELD.
const FAIL = `
  WITH failed AS (
    UPDATE webhook_endpoints SET failures = $10::integer, failing_since = $11::timestamptz, next_attempt_at = $12::timestamptz,
      enabled = $13::boolean, disabled_reason = $14::text, lease_owner = NULL, lease_until = NULL
    WHERE ${HELD} RETURNING id
  ), ${recordAttempt('failed', 'true')}
  SELECT count(*)::int AS changed FROM failed`

/** HELD's parameters for a lease, now (heldBy). */
function held(lease: WebhookLease): [string, string, string, string] {
  const { id, owner, liveAfter, position } = heldBy(lease, new Date())
  return [int8(id), owner, liveAfter, int8(position)]
}

/** recordAttempt's parameters. */
function attemptParams(attempt: WebhookAttempt | null): [string | null, string | null, number | null, string | null, number | null] {
  if (attempt === null) return [null, null, null, null, null]
  return [int8(attempt.eventId), attempt.attemptedAt, attempt.status, attempt.error, Math.round(attempt.durationMs)]
}

export class PostgresWebhooksRepository implements WebhooksRepository {
  constructor(private readonly database: PostgresDatabase) {}

  async create(endpoint: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | 'too_many'> {
    return this.database.transaction(async (connection) => {
      // data_version's row lock first, as every writer of events takes it before its positions and
      // holds it until COMMIT: once held, every event committed before is visible to the statements
      // below and every later one takes a position after the head read here. It also puts creates
      // one after the other, so the count below is exact at the commit.
      await connection.query('SELECT 1 FROM data_version WHERE id = 1 FOR UPDATE')
      const { rows: counted } = await connection.query<{ count: number }>('SELECT count(*)::int AS count FROM webhook_endpoints')
      if (counted[0]!.count >= maxEndpoints) return 'too_many'
      const { rows } = await connection.query<EndpointRow>(
        `INSERT INTO webhook_endpoints (url, event_types, description, position, created_at, secret)
         VALUES ($1, $2::text[], $3, ${HEAD}, ${WRITE_TIME}, $4) RETURNING ${ENDPOINT_COLUMNS}`,
        [endpoint.url, endpoint.eventTypes, endpoint.description, endpoint.secret],
      )
      return toEndpoint(rows[0]!)
    })
  }

  async list(): Promise<WebhookEndpoint[]> {
    const { rows } = await this.database.read<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY id`)
    return rows.map(toEndpoint)
  }

  async find(id: bigint): Promise<WebhookEndpoint | undefined> {
    const { rows } = await this.database.read<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1`, [int8(id)])
    return rows[0] === undefined ? undefined : toEndpoint(rows[0])
  }

  async update(id: bigint, patch: WebhookEndpointPatch): Promise<WebhookEndpoint | undefined> {
    return this.change(id, async (state) => patchEndpoint(state, patch))
  }

  /** The endpoint as `decide` makes it, in one transaction holding its row (undefined: no such endpoint). */
  private async change(id: bigint, decide: (state: EndpointState, connection: Connection) => Promise<EndpointChange>): Promise<WebhookEndpoint | undefined> {
    return this.database.transaction(async (connection) => {
      const { rows: found } = await connection.query<EndpointRow & { failures: number }>(
        `SELECT ${ENDPOINT_COLUMNS}, failures FROM webhook_endpoints WHERE id = $1 FOR UPDATE`,
        [int8(id)],
      )
      const row = found[0]
      if (row === undefined) return undefined
      const { state, movesRevision } = await decide({ ...toEndpoint(row), failures: row.failures }, connection)
      const { rows } = await connection.query<EndpointRow>(
        `UPDATE webhook_endpoints SET url = $2, event_types = $3::text[], description = $4, enabled = $5, disabled_reason = $6,
           position = $7::bigint, failures = $8, failing_since = $9::timestamptz, next_attempt_at = $10::timestamptz, revision = revision + $11
         WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
        [int8(id), state.url, state.eventTypes, state.description, state.enabled, state.disabledReason, int8(state.position), state.failures,
          state.failingSince, state.nextAttemptAt, movesRevision ? 1 : 0],
      )
      return toEndpoint(rows[0]!)
    })
  }

  async remove(id: bigint): Promise<boolean> {
    // Its attempts go with it (ON DELETE CASCADE).
    const { rowCount } = await this.database.execute('DELETE FROM webhook_endpoints WHERE id = $1', [int8(id)])
    return (rowCount ?? 0) > 0
  }

  async rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<boolean> {
    return this.database.transaction(async (connection) => {
      const { rows: found } = await connection.query<{ secret: string }>('SELECT secret FROM webhook_endpoints WHERE id = $1 FOR UPDATE', [int8(id)])
      const row = found[0]
      if (row === undefined) return false
      const secrets = rotateSecret(row.secret, secret, previousUntil)
      await connection.query(
        'UPDATE webhook_endpoints SET secret = $2, previous_secret = $3, previous_until = $4::timestamptz, revision = revision + 1 WHERE id = $1',
        [int8(id), secrets.current, secrets.previous, secrets.previousUntil],
      )
      return true
    })
  }

  async replay(id: bigint, after: bigint): Promise<WebhookEndpoint | undefined> {
    return this.change(id, async (state, connection) => {
      const { rows: bounds } = await connection.query<{ pruned_through: bigint; newest: bigint | null }>(
        'SELECT (SELECT pruned_through FROM event_retention WHERE id = 1) AS pruned_through, (SELECT max(position) FROM order_events) AS newest',
      )
      checkCursor(after, bounds[0]!.pruned_through, bounds[0]!.newest)
      return replayEndpoint(state, after)
    })
  }

  async attempts(id: bigint, limit: number): Promise<WebhookAttempt[] | undefined> {
    // One statement: no row when there is no such endpoint, one of nulls when it has no attempts.
    const { rows } = await this.database.read<{ [K in keyof AttemptRow]: AttemptRow[K] | null }>(
      `SELECT a.event_position, ${utc('a.attempted_at')} AS attempted_at, a.status, a.error, a.duration_ms
       FROM webhook_endpoints AS e
       LEFT JOIN LATERAL (SELECT * FROM webhook_attempts WHERE endpoint_id = e.id ORDER BY id DESC LIMIT $2) AS a ON true
       WHERE e.id = $1 ORDER BY a.id DESC`,
      [int8(id), Math.min(limit, ATTEMPTS_KEPT)],
    )
    if (rows.length === 0) return undefined
    return rows.filter((row) => row.event_position !== null).map((row) => toAttempt(row as AttemptRow))
  }

  async lease(owner: string, now: Date, leaseMs: number, limit: number): Promise<WebhookLease[]> {
    const { until, asOf } = leasePass(now, leaseMs)
    const { rows } = await this.database.execute<LeasedRow>(LEASE, [owner, until.toISOString(), asOf, limit])
    return toLeases(rows, owner, until, now)
  }

  async renew(lease: WebhookLease, now: Date, leaseMs: number): Promise<boolean> {
    const { liveAfter, until } = renewLease(now, leaseMs)
    const { rowCount } = await this.database.execute(
      'UPDATE webhook_endpoints SET lease_until = $4 WHERE id = $1 AND lease_owner = $2 AND lease_until > $3 AND enabled',
      [int8(lease.endpoint.id), lease.owner, liveAfter, until.toISOString()],
    )
    const done = (rowCount ?? 0) > 0
    if (done) lease.leaseUntil = until
    return done
  }

  async release(lease: WebhookLease): Promise<void> {
    await this.database.execute('UPDATE webhook_endpoints SET lease_owner = NULL, lease_until = $3 WHERE id = $1 AND lease_owner = $2', [
      int8(lease.endpoint.id),
      lease.owner,
      new Date().toISOString(),
    ])
  }

  async unchanged(lease: WebhookLease): Promise<boolean> {
    const { rows } = await this.database.read<{ revision: number }>(
      'SELECT revision FROM webhook_endpoints WHERE id = $1 AND lease_owner = $2 AND lease_until > $3',
      [int8(lease.endpoint.id), lease.owner, new Date().toISOString()],
    )
    return rows[0]?.revision === lease.revision
  }

  async next(lease: WebhookLease, limit: number): Promise<NextEvents> {
    const after = lease.endpoint.position
    const { rows } = await this.database.read<NextRow>({ name: 'webhooks-next', text: NEXT }, [int8(after), Math.max(limit, NEXT_SCAN), lease.endpoint.eventTypes, limit])
    return toNextEvents(after, limit, rows)
  }

  /**
   * Committed without waiting for its WAL flush (synchronous_commit off, this transaction only):
   * durable when this process dies, not when PostgreSQL crashes. A position is written only after
   * its event's 2xx, so one lost moves the endpoint back and its events are sent again (at least
   * once); none is skipped. A flush per event held one endpoint to ~60 events a second here.
   */
  async advance(lease: WebhookLease, position: bigint, attempt: WebhookAttempt | null): Promise<boolean> {
    const trim = trimsAttempts(lease.endpoint.position, position)
    const { rows } = await this.database.execute<{ revision: number | null }>({ name: 'webhooks-advance', text: ADVANCE }, [
      ...held(lease),
      ...attemptParams(attempt),
      int8(position),
      trim,
    ])
    const { revision } = rows[0]!
    if (revision === null) return false
    advanceLease(lease, position, revision)
    return true
  }

  async fail(lease: WebhookLease, attempt: WebhookAttempt, next: AfterFailure): Promise<boolean> {
    const params = held(lease)
    return this.database.transaction(async (connection) => {
      const { rows: found } = await connection.query<EndpointRow & { failures: number }>(
        `SELECT ${ENDPOINT_COLUMNS}, failures FROM webhook_endpoints WHERE ${HELD} FOR UPDATE`,
        params,
      )
      const row = found[0]
      if (row === undefined) return false
      const state = failDelivery({ ...toEndpoint(row), failures: row.failures }, attempt.attemptedAt, next)
      const { rows } = await connection.query<{ changed: number }>(FAIL, [
        ...params,
        ...attemptParams(attempt),
        state.failures,
        state.failingSince,
        state.nextAttemptAt,
        state.enabled,
        state.disabledReason,
      ])
      return rows[0]!.changed > 0
    })
  }

  async disable(lease: WebhookLease, reason: WebhookDisabledReason): Promise<boolean> {
    const { enabled, disabledReason, nextAttemptAt } = disabled(reason)
    const { rowCount } = await this.database.execute(
      `UPDATE webhook_endpoints SET enabled = $5, disabled_reason = $6, next_attempt_at = $7::timestamptz, lease_owner = NULL, lease_until = NULL
       WHERE ${HELD}`,
      [...held(lease), enabled, disabledReason, nextAttemptAt],
    )
    return (rowCount ?? 0) > 0
  }

  async lag(): Promise<{ id: bigint; events: bigint }[]> {
    const { rows } = await this.database.read<{ id: bigint; events: bigint }>(
      `SELECT id, greatest(${HEAD} - position, 0) AS events FROM webhook_endpoints WHERE enabled ORDER BY id`,
    )
    return rows
  }

  async forgetPreviousSecrets(now: Date): Promise<number> {
    // Those signingSecretsAt no longer signs with: their window ended at or before now.
    const { rowCount } = await this.database.execute(
      'UPDATE webhook_endpoints SET previous_secret = NULL, previous_until = NULL WHERE previous_until <= $1',
      [now.toISOString()],
    )
    return rowCount ?? 0
  }

  async signingSecrets(id: bigint, now: Date): ReturnType<WebhooksRepository['signingSecrets']> {
    const { rows } = await this.database.read<Pick<LeasedRow, 'secret' | 'previous_secret' | 'previous_until'>>(
      `SELECT secret, previous_secret, ${utc('previous_until')} AS previous_until FROM webhook_endpoints WHERE id = $1`,
      [int8(id)],
    )
    const row = rows[0]
    return row === undefined ? undefined : signingSecretsAt(row.secret, row.previous_secret, row.previous_until, now)
  }

  async claimPing(id: bigint, token: string, now: Date, until: Date): Promise<'claimed' | 'in_flight' | undefined> {
    try {
      const { rows } = await this.database.execute<{ found: boolean; claimed: boolean }>(CLAIM_PING, [int8(id), token, until.toISOString(), now.toISOString()])
      const { found, claimed } = rows[0]!
      return !found ? undefined : claimed ? 'claimed' : 'in_flight'
    } catch (error) {
      if ((error as { code?: string }).code === FOREIGN_KEY_VIOLATION) return undefined
      throw error
    }
  }

  async releasePing(id: bigint, token: string): Promise<void> {
    await this.database.execute('DELETE FROM webhook_ping_claims WHERE endpoint_id = $1 AND token = $2', [int8(id), token])
  }
}
