import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import type { ApiKey, NewApiKey, Scope } from '../../domain/api-keys.js'
import { parseInt64 } from '../../domain/int64.js'
import type { OrderPageQuery, OrderV2Record } from '../../domain/order-pages.js'
import { canMoveTo, toApiOrder, type CancelOutcome, type OrderRecord, type OrderStatus, type ShipOutcome } from '../../domain/orders.js'
import type { Order } from '../../schemas/order.js'
import type { Pet } from '../../schemas/pet.js'
import { ImportConflictError, pendingMigrations, StoreUnavailableError, type Store } from '../store.js'
import { CancelBatcher } from './cancel-batcher.js'
import { BUMP_DATA_VERSION, SQLITE_MIGRATIONS } from './migrations.js'
import { readCursorSecret, readOrderPage, readOrderV2 } from './order-pages.js'

type Db = Database.Database

// SQLite result codes that mean "the database cannot serve this now", not "this request is wrong".
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|READONLY|IOERR|FULL|CANTOPEN|CORRUPT|NOTADB|PROTOCOL)/

/** Opens a connection the way every connection of this store must be opened. */
function connect(path: string, readonly: boolean, busyTimeoutMs: number): Db {
  const db = new Database(path, { readonly, fileMustExist: readonly })
  db.pragma(`busy_timeout = ${busyTimeoutMs}`)
  if (!readonly) db.pragma('journal_mode = WAL')
  // FULL, set on every connection: in WAL mode it syncs the WAL on every commit, so an acknowledged
  // cancel survives power loss, not only a crash of this process.
  db.pragma('synchronous = FULL')
  db.pragma('foreign_keys = ON')
  db.defaultSafeIntegers(true) // every INTEGER comes back as a bigint: ids never touch a number
  return db
}

interface OrderRow {
  id: bigint
  pet_id: bigint | null
  quantity: bigint | null
  ship_date: string | null
  complete: bigint
}

interface KeyRow {
  id: bigint
  name: string
  display_prefix: string
  scopes: string
  created_at: string
  expires_at: string | null
  revoked_at: string | null
}

/** How long a data version read from the database is reused (see dataVersion). */
export const VERSION_RECHECK_MS = 5

const LIST_ORDERS = `SELECT id, pet_id, quantity, ship_date, complete FROM orders WHERE status <> 'cancelled' ORDER BY id`
// One page of the order list as JSON text, exactly as the Order schema serializes it: fields in
// schema order, NULLs omitted (`',"petId":' || NULL` is NULL; json_quote(NULL) is 'null', hence
// the iif), ids as SQLite's exact integer text. The pages's rows reach group_concat in the order of
// the ordered, limited subquery (a co-routine); an ORDER BY inside group_concat would sort each page
// again and cost half as much as building it. test/list-streaming.test.ts holds the order.
// As a BLOB, the page reaches JavaScript as its UTF-8 bytes: one copy out of SQLite, where a string
// would be decoded here and encoded again for the socket or the compressor.
const JSON_PAGE = `
  SELECT CAST(group_concat(json, ',') AS BLOB), max(id) FROM (
    SELECT id, '{"id":' || id
      || coalesce(',"petId":' || pet_id, '')
      || coalesce(',"quantity":' || quantity, '')
      || iif(ship_date IS NULL, '', ',"shipDate":' || json_quote(ship_date))
      || ',"complete":' || iif(complete, 'true', 'false') || '}' AS json
    FROM orders WHERE status <> 'cancelled' AND ?ID? ORDER BY id LIMIT ?)`
const KEY_COLUMNS = 'id, name, display_prefix, scopes, created_at, expires_at, revoked_at'

function rowToOrder(row: OrderRow): Order {
  return toApiOrder({
    id: row.id,
    petId: row.pet_id,
    quantity: row.quantity === null ? null : Number(row.quantity),
    shipDate: row.ship_date,
    complete: row.complete !== 0n,
  })
}

function rowToKey(row: KeyRow): ApiKey {
  return {
    id: row.id,
    name: row.name,
    displayPrefix: row.display_prefix,
    scopes: row.scopes.split(',') as Scope[],
    createdAt: new Date(row.created_at),
    expiresAt: row.expires_at === null ? null : new Date(row.expires_at),
    revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at),
  }
}

/** Rethrows a driver error as StoreUnavailableError when it means the database is unavailable. */
function classify(error: unknown): never {
  const code = (error as { code?: unknown }).code
  if (typeof code === 'string' && UNAVAILABLE.test(code)) {
    throw new StoreUnavailableError(`SQLite is unavailable (${code})`, { cause: error })
  }
  throw error
}

export interface SqliteStoreOptions {
  /**
   * How long one statement waits for another process's write lock, blocking the event loop
   * meanwhile. The CLI can wait (default 5 s); the server waits briefly and retries cancels
   * asynchronously instead (see CancelBatcher).
   */
  busyTimeoutMs?: number
}

export class SqliteStore implements Store {
  readonly kind = 'sqlite'
  readonly path: string
  private readonly busyTimeoutMs: number
  private readonly db: Db
  private readonly idleReaders: Db[] = []
  private versionQuery: Database.Statement | undefined
  private version: { value: bigint; readAt: number } | undefined
  private cancels: CancelBatcher | undefined // prepared on first use: the tables exist after migrate()
  private closed = false

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.path = path
    this.busyTimeoutMs = options.busyTimeoutMs ?? 5000
    mkdirSync(dirname(path), { recursive: true })
    try {
      this.db = connect(path, false, this.busyTimeoutMs)
    } catch (error) {
      classify(error)
    }
  }

  async migrate(): Promise<number[]> {
    const db = this.db
    db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
    // IMMEDIATE takes the write lock first, so two processes starting together migrate one at a time.
    const apply = db.transaction(() => {
      const { v } = db.prepare('SELECT coalesce(max(version), 0) AS v FROM schema_migrations').get() as { v: bigint }
      const pending = pendingMigrations(SQLITE_MIGRATIONS, Number(v))
      for (const migration of pending) {
        db.exec(migration.sql)
        db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
          migration.version,
          migration.name,
          new Date().toISOString(),
        )
      }
      return pending.map((migration) => migration.version)
    })
    try {
      return apply.immediate()
    } catch (error) {
      classify(error)
    }
  }

  async ping(): Promise<void> {
    this.readVersion() // a read of the database, as list requests make
  }

  async *streamOrders(batchSize = 1000): AsyncIterable<Order[]> {
    // Each stream iterates on a connection of its own: the statement holds one read snapshot (WAL)
    // for the whole list while cancels commit on the writer connection.
    const reader = this.acquireReader()
    let rows: IterableIterator<OrderRow> | undefined
    try {
      rows = reader.prepare(LIST_ORDERS).iterate() as IterableIterator<OrderRow>
      let batch: Order[] = []
      for (const row of rows) {
        batch.push(rowToOrder(row))
        if (batch.length === batchSize) {
          yield batch
          batch = []
        }
      }
      if (batch.length > 0) yield batch
    } catch (error) {
      classify(error)
    } finally {
      rows?.return?.()
      this.releaseReader(reader)
    }
  }

  dataVersion(): bigint {
    // Every list request asks. A statement costs a few µs of locking in WAL mode, a large share of
    // a small request, so the answer is reused for VERSION_RECHECK_MS: this process's own writes
    // forget it at once (exact), another process's are seen within that bound.
    const now = performance.now()
    if (this.version !== undefined && now - this.version.readAt < VERSION_RECHECK_MS) return this.version.value
    const value = this.readVersion()
    this.version = { value, readAt: now }
    return value
  }

  private readVersion(): bigint {
    try {
      this.versionQuery ??= this.db.prepare('SELECT version FROM data_version WHERE id = 1').pluck()
      return this.versionQuery.get() as bigint
    } catch (error) {
      classify(error)
    }
  }

  async *streamOrdersJson(pageSize = 1000): AsyncIterable<Buffer> {
    // Keyset pages in one read transaction on a connection of its own: one snapshot for the whole
    // list, and SQLite writes each page's JSON text itself, so no object is built per row.
    const reader = this.acquireReader()
    try {
      const first = reader.prepare(JSON_PAGE.replace('?ID?', 'TRUE')).raw(true)
      const next = reader.prepare(JSON_PAGE.replace('?ID?', 'id > ?')).raw(true)
      reader.exec('BEGIN')
      let page = first.get(pageSize) as [Buffer | null, bigint | null]
      while (page[0] !== null) {
        yield page[0]
        page = next.get(page[1], pageSize) as [Buffer | null, bigint | null]
      }
    } catch (error) {
      classify(error)
    } finally {
      this.releaseReader(reader) // ends the read transaction
    }
  }

  cancelOrder(id: bigint, cancelledByKey: bigint | null): Promise<CancelOutcome> {
    try {
      this.cancels ??= this.openCancelBatcher()
    } catch (error) {
      return Promise.reject(error).catch(classify)
    }
    return this.cancels.cancel(id, cancelledByKey).catch(classify)
  }

  /** Group commit on a writer of its own, opened at the first cancel (CLI commands never need one). */
  private openCancelBatcher(): CancelBatcher {
    // Opened as every connection is (a brief lock while it is set up is waited for, once); the
    // batcher then makes its commits never wait for the lock.
    const writer = connect(this.path, false, this.busyTimeoutMs)
    try {
      return new CancelBatcher(writer, () => (this.version = undefined))
    } catch (error) {
      writer.close()
      throw error
    }
  }

  async shipOrder(id: bigint): Promise<ShipOutcome> {
    const db = this.db
    const ship = db.transaction((): ShipOutcome => {
      const shipped = db.prepare(`UPDATE orders SET status = 'shipped' WHERE id = ? AND status = 'pending'`).run(id)
      if (shipped.changes === 1) {
        bumpVersion(db)
        return 'shipped'
      }
      const row = db.prepare('SELECT status FROM orders WHERE id = ?').get(id) as { status: OrderStatus } | undefined
      if (row === undefined) return 'not_found'
      return row.status === 'cancelled' ? 'cancelled' : 'already_shipped'
    })
    try {
      return ship.immediate()
    } catch (error) {
      classify(error)
    } finally {
      this.version = undefined
    }
  }

  async importOrders(records: AsyncIterable<OrderRecord>, onProgress?: (count: number) => void): Promise<number> {
    const db = this.db
    // A status only moves forward (pending → shipped | cancelled); the WHERE refuses anything else.
    const upsert = db.prepare(`
      INSERT INTO orders (id, pet_id, quantity, ship_date, complete, status, cancelled_at)
      VALUES (@id, @petId, @quantity, @shipDate, @complete, @status, @cancelledAt)
      ON CONFLICT (id) DO UPDATE SET
        pet_id = excluded.pet_id, quantity = excluded.quantity, ship_date = excluded.ship_date,
        complete = excluded.complete, status = excluded.status,
        cancelled_at = coalesce(orders.cancelled_at, excluded.cancelled_at)
      WHERE orders.status = 'pending' OR orders.status = excluded.status`)
    const statusOf = db.prepare('SELECT status FROM orders WHERE id = ?')
    return this.inTransaction(async () => {
      let count = 0
      const now = new Date().toISOString()
      for await (const record of records) {
        const result = upsert.run({
          id: record.id,
          petId: record.petId,
          quantity: record.quantity === null ? null : BigInt(record.quantity),
          shipDate: record.shipDate,
          complete: record.complete ? 1n : 0n,
          status: record.status,
          cancelledAt: record.status === 'cancelled' ? now : null,
        })
        if (result.changes === 0) {
          const current = (statusOf.get(record.id) as { status: OrderStatus }).status
          if (!canMoveTo(current, record.status)) {
            throw new ImportConflictError(`order ${record.id} is ${current} and cannot become ${record.status}`)
          }
        }
        count++
        if (onProgress !== undefined && count % 10_000 === 0) onProgress(count)
      }
      if (count > 0) bumpVersion(db)
      return count
    })
  }

  async importPets(records: AsyncIterable<Pet>, onProgress?: (count: number) => void): Promise<number> {
    const upsert = this.db.prepare(`
      INSERT INTO pets (id, name, tag) VALUES (@id, @name, @tag)
      ON CONFLICT (id) DO UPDATE SET name = excluded.name, tag = excluded.tag`)
    return this.inTransaction(async () => {
      let count = 0
      for await (const pet of records) {
        upsert.run({ id: pet.id, name: pet.name, tag: pet.tag ?? null })
        count++
        if (onProgress !== undefined && count % 10_000 === 0) onProgress(count)
      }
      return count
    })
  }

  async findPet(id: bigint): Promise<Pet | undefined> {
    try {
      const row = this.db.prepare('SELECT id, name, tag FROM pets WHERE id = ?').get(id) as
        | { id: bigint; name: string; tag: string | null }
        | undefined
      if (row === undefined) return undefined
      return row.tag === null ? { id: row.id, name: row.name } : { id: row.id, name: row.name, tag: row.tag }
    } catch (error) {
      classify(error)
    }
  }

  async orderPage(query: OrderPageQuery): Promise<OrderV2Record[]> {
    return this.reading(() => readOrderPage(this.db, query))
  }

  async findOrderV2(id: bigint): Promise<OrderV2Record | undefined> {
    return this.reading(() => readOrderV2(this.db, id))
  }

  async cursorSecret(): Promise<Buffer> {
    return this.reading(() => readCursorSecret(this.db))
  }

  private reading<T>(read: () => T): T {
    try {
      return read()
    } catch (error) {
      classify(error)
    }
  }

  async createApiKey(key: NewApiKey): Promise<ApiKey> {
    try {
      const row = this.db
        .prepare(
          `INSERT INTO api_keys (name, hash, display_prefix, scopes, created_at, expires_at)
           VALUES (?, ?, ?, ?, ?, ?) RETURNING ${KEY_COLUMNS}`,
        )
        .get(key.name, key.hash, key.displayPrefix, key.scopes.join(','), new Date().toISOString(), key.expiresAt?.toISOString() ?? null) as KeyRow
      return rowToKey(row)
    } catch (error) {
      classify(error)
    }
  }

  async findApiKeyByHash(hash: string): Promise<ApiKey | undefined> {
    try {
      const row = this.db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE hash = ?`).get(hash) as KeyRow | undefined
      return row === undefined ? undefined : rowToKey(row)
    } catch (error) {
      classify(error)
    }
  }

  async listApiKeys(): Promise<ApiKey[]> {
    try {
      return (this.db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY id`).all() as KeyRow[]).map(rowToKey)
    } catch (error) {
      classify(error)
    }
  }

  async revokeApiKey(idOrPrefix: string): Promise<ApiKey | undefined> {
    const db = this.db
    const revoke = db.transaction((): ApiKey | undefined => {
      // Digits are an id (one beyond int64 matches no key); anything else is a display prefix.
      const id = /^[0-9]+$/.test(idOrPrefix) ? (parseInt64(idOrPrefix) ?? null) : undefined
      const matches = (
        id !== undefined
          ? db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`).all(id)
          : db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE display_prefix = ?`).all(idOrPrefix)
      ) as KeyRow[]
      if (matches.length > 1) throw new Error(`"${idOrPrefix}" matches ${matches.length} keys; revoke by id`)
      const match = matches[0]
      if (match === undefined) return undefined
      const row = db
        .prepare(`UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ? RETURNING ${KEY_COLUMNS}`)
        .get(new Date().toISOString(), match.id) as KeyRow
      return rowToKey(row)
    })
    try {
      return revoke.immediate()
    } catch (error) {
      classify(error)
    }
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.cancels?.close()
    for (const reader of this.idleReaders.splice(0)) reader.close()
    this.db.close()
  }

  /** BEGIN IMMEDIATE … COMMIT around async work (imports read their input while writing). */
  private async inTransaction<T>(work: () => Promise<T>): Promise<T> {
    try {
      this.db.exec('BEGIN IMMEDIATE')
    } catch (error) {
      classify(error)
    }
    try {
      const result = await work()
      this.db.exec('COMMIT')
      return result
    } catch (error) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK')
      throw error
    } finally {
      this.version = undefined
    }
  }

  private acquireReader(): Db {
    try {
      return this.idleReaders.pop() ?? connect(this.path, true, this.busyTimeoutMs)
    } catch (error) {
      classify(error)
    }
  }

  private releaseReader(reader: Db): void {
    let reusable = !this.closed && this.idleReaders.length < 4
    try {
      if (reader.inTransaction) reader.exec('COMMIT') // a read snapshot: nothing to write
    } catch {
      reusable = false // still in its transaction, it would fail the next list's BEGIN
    }
    if (reusable) this.idleReaders.push(reader)
    else reader.close()
  }
}

function bumpVersion(db: Db): void {
  db.prepare(BUMP_DATA_VERSION).run()
}
