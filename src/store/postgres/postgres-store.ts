import pg from 'pg'
import { to as copyTo } from 'pg-copy-streams'
import type { ApiKey, NewApiKey, Scope } from '../../domain/api-keys.js'
import type { OrderPageQuery, OrderV2Record } from '../../domain/order-pages.js'
import { toApiOrder, type CancelOutcome, type OrderRecord, type OrderStatus, type ShipOutcome } from '../../domain/orders.js'
import type { Order } from '../../schemas/order.js'
import type { Pet } from '../../schemas/pet.js'
import { ImportConflictError, StoreUnavailableError, type Store } from '../store.js'
import { CancelBatcher, type BatchOutcome, type CancelRequest } from './cancel-batcher.js'
import { runMigrations } from './migration-runner.js'
import { readCursorSecret, readOrderPage, readOrderV2 } from './order-pages.js'
import { commaJoinedLines } from './copy-lines.js'
import { isLostConnection, isUnavailable, toStoreError } from './errors.js'
import { POSTGRES_MIGRATIONS } from './migrations.js'
import { LISTENER_QUERY_TIMEOUT_MS, VERSION_CHANNEL, VersionWatcher } from './version-watcher.js'

const INT8_OID = 20

/**
 * Type parsers of this store's pool only (pg's global parsers are left alone): int8 comes back as a
 * bigint, so an id never passes through a JS number. Every other type keeps pg's parser
 * (timestamptz → Date, text[] → string[], int4 → number, bool → boolean).
 */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid === INT8_OID && format !== 'binary') return (value: string) => BigInt(value)
    return pg.types.getTypeParser(oid, format)
  }) as typeof pg.types.getTypeParser,
}

/** Rows per multi-row INSERT of an import; 10,000 (the progress step) is a multiple of it. */
const IMPORT_BATCH = 5_000
const PROGRESS_STEP = 10_000

// ship_date is read back exactly as Date#toISOString() writes it: UTC, milliseconds, 'Z'.
const SHIP_DATE = `to_char(ship_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
const LIST_ORDERS = `SELECT id, pet_id, quantity, ${SHIP_DATE} AS ship_date, complete
  FROM orders WHERE status <> 'cancelled' ORDER BY id`
const KEY_COLUMNS = 'id, name, display_prefix, scopes, created_at, expires_at, revoked_at'
const INT64_MAX = 9223372036854775807n

/**
 * Every bump of data_version: it returns the new version, and NOTIFYs it in the same transaction
 * (delivered at COMMIT) to every instance listening (see version-watcher.ts).
 */
function bumpVersion(condition = ''): string {
  return `UPDATE data_version SET version = version + 1 WHERE id = 1${condition}
    RETURNING version, pg_notify('${VERSION_CHANNEL}', version::text)`
}

/**
 * The JSON list, one order per line, in id order. Each order's JSON is stored in `orders.list_json`
 * (migration 2), so nothing is built per order on either side. One statement: one snapshot.
 */
const LIST_JSON_COPY = `COPY (SELECT list_json FROM orders WHERE status <> 'cancelled' ORDER BY id) TO STDOUT`

// One cancel on its own (an order another transaction held locked when its batch ran; see
// cancel-batcher.ts). The conditional update and the version bump are one statement, hence one
// transaction: the bump happens exactly when the order changed. The status of an order that did not
// change is read by a separate statement, whose fresh snapshot sees whatever change made the update miss.
const CANCEL = `WITH changed AS (
    UPDATE orders SET status = 'cancelled', cancelled_at = now(), cancelled_by_key = $2
    WHERE id = $1 AND status = 'pending' RETURNING id
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  )
  SELECT count(*)::int AS changed, (SELECT version FROM bumped) AS version FROM changed`
/**
 * A batch of cancels, distinct orders, in one statement (one transaction). Rows another transaction
 * holds locked are skipped, not waited for: a batch never waits for an order's lock while holding
 * others' (no deadlock with a concurrent import or another instance's batch, and one slow lock does
 * not hold up the whole batch); those orders are cancelled one by one afterwards. The version is
 * bumped once, if anything was cancelled. Every sub-statement sees the statement's snapshot: the
 * orders then shipped are final; those then pending and not cancelled here were locked (or changed
 * since), and are the ones cancelled one by one.
 */
const CANCEL_BATCH = `WITH request AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS r(id, cancelled_by_key)
  ), target AS (
    SELECT o.id, r.cancelled_by_key FROM orders o JOIN request r ON r.id = o.id
    WHERE o.status = 'pending' ORDER BY o.id FOR UPDATE OF o SKIP LOCKED
  ), changed AS (
    UPDATE orders o SET status = 'cancelled', cancelled_at = now(), cancelled_by_key = t.cancelled_by_key
    FROM target t WHERE o.id = t.id AND o.status = 'pending' RETURNING o.id
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  )
  SELECT ARRAY(SELECT id FROM changed)::text[] AS cancelled,
    ARRAY(SELECT o.id FROM orders o JOIN request r ON r.id = o.id WHERE o.status = 'shipped')::text[] AS shipped,
    ARRAY(SELECT o.id FROM orders o JOIN request r ON r.id = o.id WHERE o.status = 'pending')::text[] AS pending,
    (SELECT version FROM bumped) AS version`
const SHIP = `WITH changed AS (
    UPDATE orders SET status = 'shipped' WHERE id = $1 AND status = 'pending' RETURNING id
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  )
  SELECT count(*)::int AS changed, (SELECT version FROM bumped) AS version FROM changed`

// A status only moves forward (pending → shipped | cancelled); the WHERE refuses anything else and
// the refused rows are then looked up to name the first one. now() is the transaction's start, so
// every order an import cancels gets the same cancelled_at, as in the SQLite store.
const UPSERT_ORDERS = `INSERT INTO orders AS o (id, pet_id, quantity, ship_date, complete, status, cancelled_at)
  SELECT t.id, t.pet_id, t.quantity, t.ship_date, t.complete, t.status,
         CASE WHEN t.status = 'cancelled' THEN now() END
  FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::timestamptz[], $5::boolean[], $6::text[])
    AS t(id, pet_id, quantity, ship_date, complete, status)
  ON CONFLICT (id) DO UPDATE SET
    pet_id = excluded.pet_id, quantity = excluded.quantity, ship_date = excluded.ship_date,
    complete = excluded.complete, status = excluded.status,
    cancelled_at = coalesce(o.cancelled_at, excluded.cancelled_at)
  WHERE o.status = 'pending' OR o.status = excluded.status`
// After the upsert, an accepted row has the status it was given; a refused one still has another.
const FIRST_REFUSED = `SELECT t.id, o.status AS current, t.status AS wanted
  FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS t(id, status, n)
  JOIN orders o ON o.id = t.id
  WHERE o.status <> t.status
  ORDER BY t.n LIMIT 1`
const UPSERT_PETS = `INSERT INTO pets (id, name, tag)
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])
  ON CONFLICT (id) DO UPDATE SET name = excluded.name, tag = excluded.tag`

interface OrderRow {
  id: bigint
  pet_id: bigint | null
  quantity: number | null
  ship_date: string | null
  complete: boolean
}

interface KeyRow {
  id: bigint
  name: string
  display_prefix: string
  scopes: string[]
  created_at: Date
  expires_at: Date | null
  revoked_at: Date | null
}

function rowToOrder(row: OrderRow): Order {
  return toApiOrder({ id: row.id, petId: row.pet_id, quantity: row.quantity, shipDate: row.ship_date, complete: row.complete })
}

function rowToKey(row: KeyRow): ApiKey {
  return {
    id: row.id,
    name: row.name,
    displayPrefix: row.display_prefix,
    scopes: row.scopes as Scope[],
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
  }
}

/**
 * PostgreSQL array literals for the batch parameters of an import, built directly: pg would build
 * the same text, but an import sends millions of elements and this is cheaper. Integers and booleans
 * need no quoting; text elements are quoted and escaped.
 */
function intArray(values: (bigint | number | null)[]): string {
  let text = '{'
  for (let i = 0; i < values.length; i++) {
    const value = values[i]
    text += (i === 0 ? '' : ',') + (value === null || value === undefined ? 'NULL' : value.toString())
  }
  return text + '}'
}

function boolArray(values: boolean[]): string {
  let text = '{'
  for (let i = 0; i < values.length; i++) text += (i === 0 ? '' : ',') + (values[i] ? 't' : 'f')
  return text + '}'
}

function textArray(values: (string | null | undefined)[]): string {
  let text = '{'
  for (let i = 0; i < values.length; i++) {
    const value = values[i]
    text += (i === 0 ? '' : ',') + (value === null || value === undefined ? 'NULL' : `"${value.replace(/[\\"]/g, '\\$&')}"`)
  }
  return text + '}'
}

/** int64 parameters go to the server as decimal text: never through a JS number. */
function int8(value: bigint): string
function int8(value: bigint | null): string | null
function int8(value: bigint | null): string | null {
  return value === null ? null : value.toString()
}

/** A statement: its text, or a query config (rows as arrays, its own type parsers). */
type Statement = string | pg.QueryConfig | pg.QueryArrayConfig

/** A client taken from the pool for several statements (a transaction, a cursor). */
class Lease {
  // Between two statements nobody listens to a checked-out client; a connection dying then would be
  // an unhandled 'error' event, which ends the process. The next statement fails and says why.
  private readonly onIdleError = (): void => {}
  private released = false

  constructor(readonly client: pg.PoolClient) {
    client.on('error', this.onIdleError)
  }

  /** Runs one statement; a driver error meaning "unavailable" comes out as StoreUnavailableError. */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: Statement, params?: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      // A QueryArrayConfig's rows are arrays: its callers say so in R.
      return await this.client.query<R>(sql as string | pg.QueryConfig, params)
    } catch (error) {
      throw toStoreError(error)
    }
  }

  /** Back to the pool; a client whose connection failed is discarded instead. */
  release(failure?: unknown): void {
    this.giveBack(failure !== undefined && isUnavailable(failure) ? (failure as Error) : undefined)
  }

  /** Closes the connection instead of returning it (one in a state no other statement may inherit). */
  discard(): void {
    this.giveBack(new Error('connection discarded'))
  }

  /** To the pool, which closes the client when given an error; a closing client keeps its 'error' listener. */
  private giveBack(closeWith: Error | undefined): void {
    if (this.released) return
    this.released = true
    if (closeWith === undefined) this.client.removeListener('error', this.onIdleError)
    this.client.release(closeWith)
  }

  /** Ends the open transaction (which also closes its cursors), then releases. Never throws. */
  async rollbackAndRelease(failure?: unknown): Promise<void> {
    if (failure !== undefined && isUnavailable(failure)) return this.release(failure)
    try {
      await this.client.query('ROLLBACK')
      this.release()
    } catch (error) {
      this.release(error instanceof Error ? error : new Error(String(error)))
    }
  }
}

/**
 * Rows waiting to be written by one multi-row INSERT. An id appears at most once in a batch (ON
 * CONFLICT cannot touch one row twice in a statement), so a repeated id first flushes the batch:
 * records then apply in input order, exactly as if upserted one by one.
 */
class Batch<R extends { id: bigint }> {
  records: R[] = []
  private readonly ids = new Set<bigint>()

  has(id: bigint): boolean {
    return this.ids.has(id)
  }

  add(record: R): void {
    this.records.push(record)
    this.ids.add(record.id)
  }

  take(): R[] {
    const records = this.records
    this.records = []
    this.ids.clear()
    return records
  }
}

export interface PostgresStoreOptions {
  /** Connections in the pool (DATABASE_POOL_SIZE). */
  poolSize?: number
  /** How long to wait for a connection (new or from a busy pool) before answering "unavailable". */
  connectionTimeoutMillis?: number
}

export class PostgresStore implements Store {
  readonly kind = 'postgres'
  private readonly pool: pg.Pool
  private readonly poolSize: number
  /** dataVersion() from memory (LISTEN/NOTIFY on one more connection, outside the pool). */
  private readonly versions: VersionWatcher
  private readonly cancels: CancelBatcher
  private closing: Promise<void> | undefined

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.poolSize = options.poolSize ?? 10
    const connection = {
      connectionString: url,
      connectionTimeoutMillis: options.connectionTimeoutMillis ?? 2000,
      // TCP keepalive probes find a peer that vanished without closing (a dead host, a partition)
      // on idle connections, so the pool does not hand them out for ever.
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      application_name: 'petstore-orders', // unless the URL names one
      types: TYPES,
    }
    this.pool = new pg.Pool({ ...connection, max: this.poolSize, idleTimeoutMillis: 30_000 })
    // An idle client whose connection dies (server restart, pg_terminate_backend, network) is
    // removed by the pool, which then emits 'error': without a listener that would end the process.
    // Nothing to do here: the next statement opens a new connection, or fails as unavailable.
    this.pool.on('error', () => {})
    // A client checked out through the promise API gets its listener (Lease) one microtask after
    // the pool hands it over; a connection killed right after it was made can deliver its error
    // in the same socket read as its readiness, within that gap, with no listener at all. Every
    // client of the pool therefore always has one; statements still see their own errors.
    this.pool.on('connect', (client) => client.on('error', () => {}))
    this.versions = new VersionWatcher(
      () => new pg.Client({ ...connection, query_timeout: LISTENER_QUERY_TIMEOUT_MS }),
      async () => (await this.read<{ version: bigint }>('SELECT version FROM data_version WHERE id = 1')).rows[0]!.version,
    )
    this.cancels = new CancelBatcher(
      (requests) => this.commitCancels(requests),
      ({ id, cancelledByKey }) => this.cancelAlone(id, cancelledByKey),
    )
  }

  /** Connections of the pool: for metrics and tests. */
  poolStats(): { total: number; idle: number; waiting: number } {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount }
  }

  /** The backend pid of the data-version listener (outside the pool) while it listens: for tests. */
  versionListenerPid(): number | undefined {
    return this.versions.listenerPid
  }

  async migrate(): Promise<number[]> {
    // A connection of its own, outside any transaction: see migration-runner.ts.
    const { lease } = await this.leased(async () => ({}), (lease, error) => lease.release(error))
    try {
      const applied = await runMigrations(lease.client, POSTGRES_MIGRATIONS)
      lease.release()
      return applied
    } catch (error) {
      lease.discard() // it may be inside a transaction or still hold the lock
      throw toStoreError(error)
    }
  }

  async ping(): Promise<void> {
    await this.read('SELECT 1')
  }

  /**
   * A server-side cursor (DECLARE … FETCH) in a REPEATABLE READ READ ONLY transaction on a client of
   * its own: one snapshot for the whole list, and only one batch in memory. Plain SQL rather than
   * pg-cursor: no extra dependency, the transaction and its isolation are explicit, and ROLLBACK
   * closes the cursor and ends the snapshot in one round trip when the consumer stops early.
   */
  async *streamOrders(batchSize = 1000): AsyncGenerator<Order[]> {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, not ${batchSize}`)
    const fetch = `FETCH FORWARD ${batchSize} FROM orders_list`
    // The first batch comes in the same round trip as BEGIN and DECLARE (a multi-statement query).
    const { lease, results } = await this.begin(
      `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; DECLARE orders_list NO SCROLL CURSOR FOR ${LIST_ORDERS}; ${fetch}`,
    )
    // The next batch is fetched while the consumer handles this one.
    const next = new Prefetch(lease)
    try {
      let rows = results.at(-1)!.rows as OrderRow[]
      for (;;) {
        const last = rows.length < batchSize
        if (!last) next.start(fetch)
        if (rows.length > 0) yield rows.map(rowToOrder)
        if (last) break
        rows = (await next.take<OrderRow>()).rows
      }
    } catch (error) {
      next.fail(error)
      throw error
    } finally {
      // Also reached when the consumer breaks out of its loop (the generator's return()).
      await lease.rollbackAndRelease(await next.settle())
    }
  }

  /**
   * The list as JSON text built by PostgreSQL, streamed by `COPY (SELECT list_json …) TO STDOUT` on a
   * client of its own. A single statement reads a single snapshot. Rows come as the socket's bytes,
   * never decoded into strings (pages of 5,000 as text left ~80 MiB of dead strings for V8's old
   * generation per list: docs/benchmarks.md), with backpressure: pg-copy-streams stops reading the
   * socket while the consumer is behind. Each page is one socket read's worth of whole rows (about
   * 64 KiB), comma-joined (copy-lines.ts). A connection cannot leave a COPY half-read, so breaking out
   * discards it: PostgreSQL ends the statement when the socket closes.
   */
  async *streamOrdersJson(): AsyncGenerator<Buffer> {
    const { lease, pages, first } = await this.copyOut(LIST_JSON_COPY)
    let finished = false
    try {
      for (let page = first; page.done !== true; page = await pages.next()) yield page.value
      finished = true
    } catch (error) {
      throw toStoreError(error)
    } finally {
      if (finished) lease.release()
      else {
        await pages.return(undefined).catch(() => {})
        lease.discard()
      }
    }
  }

  /**
   * Served from memory while the version listener is up: stale by at most MAX_STALENESS_MS (1 s)
   * for changes made elsewhere, normally a few milliseconds (the NOTIFY of the change); never for
   * this instance's own changes. Read from the database (one round trip) whenever the listener is
   * down, so it fails with StoreUnavailableError while the database is. See version-watcher.ts.
   */
  dataVersion(): Promise<bigint> {
    return this.versions.current()
  }

  /** Group-committed with the cancels of the same moment (cancel-batcher.ts). */
  cancelOrder(id: bigint, cancelledByKey: bigint | null): Promise<CancelOutcome> {
    if (this.closing !== undefined) return Promise.reject(new StoreUnavailableError('the store is closed'))
    return this.cancels.cancel(id, cancelledByKey)
  }

  async shipOrder(id: bigint): Promise<ShipOutcome> {
    const { rows } = await this.write<{ changed: number; version: bigint | null }>(SHIP, [int8(id)])
    if (rows[0]!.version !== null) this.versions.observe(rows[0]!.version)
    if (rows[0]!.changed === 1) return 'shipped'
    const status = await this.statusOf(id)
    if (status === 'cancelled') return 'cancelled'
    return status === 'shipped' ? 'already_shipped' : 'not_found'
  }

  async importOrders(records: AsyncIterable<OrderRecord>, onProgress?: (count: number) => void): Promise<number> {
    const { count, version } = await this.transaction(async (lease) => {
      const count = await this.consume(records, onProgress, async (batch: OrderRecord[]) => {
        const ids = intArray(batch.map((r) => r.id))
        const statuses = textArray(batch.map((r) => r.status))
        const params = [
          ids,
          intArray(batch.map((r) => r.petId)),
          intArray(batch.map((r) => r.quantity)),
          textArray(batch.map((r) => r.shipDate)),
          boolArray(batch.map((r) => r.complete)),
          statuses,
        ]
        const result = await lease.query(UPSERT_ORDERS, params)
        if (result.rowCount === batch.length) return
        const { rows } = await lease.query<{ id: bigint; current: OrderStatus; wanted: OrderStatus }>(FIRST_REFUSED, [ids, statuses])
        const refused = rows[0]
        if (refused === undefined) throw new Error(`import: ${batch.length - (result.rowCount ?? 0)} orders were neither inserted nor updated`)
        throw new ImportConflictError(`order ${refused.id} is ${refused.current} and cannot become ${refused.wanted}`)
      })
      const version = count > 0 ? (await lease.query<{ version: bigint }>(bumpVersion())).rows[0]!.version : undefined
      return { count, version }
    })
    // Only once committed: a version that never committed must not label a list.
    if (version !== undefined) this.versions.observe(version)
    return count
  }

  async importPets(records: AsyncIterable<Pet>, onProgress?: (count: number) => void): Promise<number> {
    return this.transaction((lease) =>
      this.consume(records, onProgress, async (batch: Pet[]) => {
        await lease.query(UPSERT_PETS, [intArray(batch.map((p) => p.id)), textArray(batch.map((p) => p.name)), textArray(batch.map((p) => p.tag))])
      }),
    )
  }

  async findPet(id: bigint): Promise<Pet | undefined> {
    const { rows } = await this.read<{ id: bigint; name: string; tag: string | null }>('SELECT id, name, tag FROM pets WHERE id = $1', [int8(id)])
    const row = rows[0]
    if (row === undefined) return undefined
    return row.tag === null ? { id: row.id, name: row.name } : { id: row.id, name: row.name, tag: row.tag }
  }

  orderPage(query: OrderPageQuery): Promise<OrderV2Record[]> {
    return readOrderPage((sql, params) => this.read(sql, params), query)
  }

  findOrderV2(id: bigint): Promise<OrderV2Record | undefined> {
    return readOrderV2((sql, params) => this.read(sql, params), id)
  }

  cursorSecret(): Promise<Buffer> {
    return readCursorSecret((sql, params) => this.read(sql, params))
  }

  async createApiKey(key: NewApiKey): Promise<ApiKey> {
    const { rows } = await this.write<KeyRow>(
      `INSERT INTO api_keys (name, hash, display_prefix, scopes, expires_at)
       VALUES ($1, $2, $3, $4::text[], $5) RETURNING ${KEY_COLUMNS}`,
      [key.name, key.hash, key.displayPrefix, key.scopes, key.expiresAt?.toISOString() ?? null],
    )
    return rowToKey(rows[0]!)
  }

  async findApiKeyByHash(hash: string): Promise<ApiKey | undefined> {
    const { rows } = await this.read<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE hash = $1`, [hash])
    return rows[0] === undefined ? undefined : rowToKey(rows[0])
  }

  async listApiKeys(): Promise<ApiKey[]> {
    const { rows } = await this.read<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY id`)
    return rows.map(rowToKey)
  }

  async revokeApiKey(idOrPrefix: string): Promise<ApiKey | undefined> {
    const byId = /^[0-9]{1,19}$/.test(idOrPrefix)
    // A number past int64 cannot be the id of any key.
    if (byId && BigInt(idOrPrefix) > INT64_MAX) return undefined
    return this.transaction(async (lease) => {
      const { rows: matches } = byId
        ? await lease.query<{ id: bigint }>('SELECT id FROM api_keys WHERE id = $1 FOR UPDATE', [idOrPrefix])
        : await lease.query<{ id: bigint }>('SELECT id FROM api_keys WHERE display_prefix = $1 FOR UPDATE', [idOrPrefix])
      if (matches.length > 1) throw new Error(`"${idOrPrefix}" matches ${matches.length} keys; revoke by id`)
      const match = matches[0]
      if (match === undefined) return undefined
      const { rows } = await lease.query<KeyRow>(
        `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
        [int8(match.id)],
      )
      return rowToKey(rows[0]!)
    })
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.cancels.drain()
      await this.versions.close()
      await this.pool.end()
    })()
    return this.closing
  }

  /** One batch of cancels of distinct orders (CANCEL_BATCH); resolves once committed. */
  private async commitCancels(requests: CancelRequest[]): Promise<Map<bigint, BatchOutcome>> {
    const ids = requests.map((r) => r.id)
    // Not retried on a lost connection: the commit may have happened.
    const { rows } = await this.write<{ version: bigint | null; cancelled: string[]; shipped: string[]; pending: string[] }>(CANCEL_BATCH, [
      intArray(ids),
      intArray(requests.map((r) => r.cancelledByKey)),
    ])
    const { version, cancelled, shipped, pending } = rows[0]!
    if (version !== null) this.versions.observe(version)
    const outcomes = new Map<bigint, BatchOutcome>()
    for (const id of pending) outcomes.set(BigInt(id), 'locked')
    for (const id of shipped) outcomes.set(BigInt(id), 'already_shipped')
    for (const id of cancelled) outcomes.set(BigInt(id), 'cancelled')
    // Any other order was cancelled already, or is unknown: not found.
    return outcomes
  }

  /** One cancel in its own transaction, waiting for the order's row lock if another holds it. */
  private async cancelAlone(id: bigint, cancelledByKey: bigint | null): Promise<CancelOutcome> {
    // Not retried on a lost connection: the commit may have happened.
    const { rows } = await this.write<{ changed: number; version: bigint | null }>(CANCEL, [int8(id), int8(cancelledByKey)])
    if (rows[0]!.version !== null) this.versions.observe(rows[0]!.version)
    if (rows[0]!.changed === 1) return 'cancelled'
    const status = await this.statusOf(id)
    // Cancelled, unknown, or (imported since the update missed it) pending: not found.
    return status === 'shipped' ? 'already_shipped' : 'not_found'
  }

  private async statusOf(id: bigint): Promise<OrderStatus | undefined> {
    const { rows } = await this.read<{ status: OrderStatus }>('SELECT status FROM orders WHERE id = $1', [int8(id)])
    return rows[0]?.status
  }

  /** One statement through the pool, classified; never retried (it may have taken effect). */
  private async write<R extends pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(sql, params)
    } catch (error) {
      throw toStoreError(error)
    }
  }

  /**
   * One read-only statement through the pool. When it fails because the pooled connection it used
   * was lost (server restarted, backends terminated, failover), it is tried again: a read cannot have
   * taken effect, and the pool has discarded that connection. Several idle connections can have died
   * at once without the pool knowing yet, so up to one more try than the pool has connections.
   */
  private async read<R extends pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<pg.QueryResult<R>> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.pool.query<R>(sql, params)
      } catch (error) {
        if (!isLostConnection(error) || attempt >= this.poolSize) throw toStoreError(error)
      }
    }
  }

  /**
   * `COPY … TO STDOUT` on a client of its own, its output as comma-joined pages, and the first page
   * (so that a failure to start is thrown here).
   */
  private copyOut(sql: string): Promise<{ lease: Lease; pages: AsyncGenerator<Buffer>; first: IteratorResult<Buffer> }> {
    return this.leased(
      async (lease) => {
        const output = lease.client.query(copyTo(sql))
        // The iterator sees the stream's errors while it reads; once it has stopped, pg still reports
        // the discarded connection's end here.
        output.on('error', () => {})
        const pages = commaJoinedLines(output)
        try {
          return { pages, first: await pages.next() }
        } catch (error) {
          throw toStoreError(error)
        }
      },
      (lease) => lease.discard(),
    )
  }

  /**
   * A client of the pool with a transaction begun by `sql` (statements that change nothing; the
   * results of each are returned).
   */
  private begin(sql: Statement): Promise<{ lease: Lease; results: pg.QueryResult[] }> {
    return this.leased(
      async (lease) => {
        // A query of several statements resolves to one result per statement.
        const results = (await lease.query(sql)) as pg.QueryResult | pg.QueryResult[]
        return { results: Array.isArray(results) ? results : [results] }
      },
      (lease, error) => lease.rollbackAndRelease(error),
    )
  }

  /**
   * `start` on a client of the pool, which it keeps. When `start` fails, `abandon` gives the client
   * back; a failure on a lost pooled connection is tried again on another, as a read is.
   */
  private async leased<T>(
    start: (lease: Lease) => Promise<T>,
    abandon: (lease: Lease, error: unknown) => Promise<void> | void,
  ): Promise<T & { lease: Lease }> {
    for (let attempt = 0; ; attempt++) {
      let lease: Lease
      try {
        lease = new Lease(await this.pool.connect())
      } catch (error) {
        throw toStoreError(error)
      }
      try {
        return { ...(await start(lease)), lease }
      } catch (error) {
        await abandon(lease, error)
        if (!isLostConnection(error) || attempt >= this.poolSize) throw error
      }
    }
  }

  /** BEGIN … COMMIT on one client; any error rolls back and is rethrown (driver errors classified). */
  private async transaction<T>(work: (lease: Lease) => Promise<T>): Promise<T> {
    const { lease } = await this.begin('BEGIN')
    try {
      const result = await work(lease)
      await lease.query('COMMIT')
      lease.release()
      return result
    } catch (error) {
      await lease.rollbackAndRelease(error)
      throw error
    }
  }

  /**
   * Reads an import's records one at a time and hands them to `write` in batches of at most
   * IMPORT_BATCH, so memory stays flat whatever the input's size; while one batch is being written
   * the next one is read. Returns how many records it read.
   * An error of the input itself is rethrown as it is — but only after the records read before it
   * are written, so that a record the database refuses is reported first, as a one-by-one import would.
   */
  private async consume<R extends { id: bigint }>(
    records: AsyncIterable<R>,
    onProgress: ((count: number) => void) | undefined,
    write: (batch: R[]) => Promise<void>,
  ): Promise<number> {
    const batch = new Batch<R>()
    const writer = new Pipeline(write)
    let count = 0
    const iterator = records[Symbol.asyncIterator]()
    let exhausted = false
    try {
      for (;;) {
        let step: IteratorResult<R>
        try {
          step = await iterator.next()
        } catch (error) {
          exhausted = true
          if (batch.records.length > 0) await writer.send(batch.take())
          await writer.drain()
          throw error
        }
        if (step.done === true) {
          exhausted = true
          break
        }
        const record = step.value
        if (batch.has(record.id)) await writer.send(batch.take())
        batch.add(record)
        count++
        // Batches end on every multiple of IMPORT_BATCH, so progress is reported for records written.
        if (count % IMPORT_BATCH === 0) {
          const written = count
          await writer.send(batch.take(), onProgress !== undefined && written % PROGRESS_STEP === 0 ? () => onProgress(written) : undefined)
        }
      }
      if (batch.records.length > 0) await writer.send(batch.take())
      await writer.drain()
      return count
    } finally {
      // Nothing may still be running when the transaction ends.
      await writer.drain().catch(() => {})
      // Stopped early by a failed write: let the input release what it holds (a file, a socket).
      if (!exhausted) await iterator.return?.().catch(() => {})
    }
  }
}

/**
 * The next statement of a stream, sent before the consumer is handed the current batch, so that the
 * database works while the consumer does. At most one is in flight; its failure is seen by `take()`,
 * or by `settle()` when the consumer stopped first (never unhandled meanwhile).
 */
class Prefetch {
  private pending: Promise<pg.QueryResult> | undefined
  private failure: unknown

  constructor(private readonly lease: Lease) {}

  start(query: Statement): void {
    const pending = this.lease.query(query)
    pending.catch(() => {})
    this.pending = pending
  }

  async take<R extends pg.QueryResultRow = pg.QueryResultRow>(): Promise<pg.QueryResult<R>> {
    const pending = this.pending!
    this.pending = undefined
    return (await pending) as pg.QueryResult<R>
  }

  fail(error: unknown): void {
    this.failure ??= error
  }

  /** Waits for the statement in flight, if any; returns the stream's failure, for the release. */
  async settle(): Promise<unknown> {
    const pending = this.pending
    this.pending = undefined
    if (pending !== undefined) await pending.catch((error: unknown) => this.fail(error))
    return this.failure
  }
}

/**
 * Writes batches strictly one after another, without making the caller wait for the one in flight:
 * the caller reads (and parses) the next batch while the database writes this one.
 */
class Pipeline<R> {
  private inFlight: Promise<void> = Promise.resolve()

  constructor(private readonly write: (batch: R[]) => Promise<void>) {}

  /** Waits for the previous batch (its failure is thrown here), then starts writing this one. */
  async send(batch: R[], afterWritten?: () => void): Promise<void> {
    await this.inFlight
    const written = this.write(batch).then(afterWritten)
    written.catch(() => {}) // observed by the next send() or drain(), not unhandled meanwhile
    this.inFlight = written
  }

  /** Waits for the batch in flight; throws its failure. */
  drain(): Promise<void> {
    return this.inFlight
  }
}
