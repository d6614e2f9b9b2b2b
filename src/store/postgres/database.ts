import pg from 'pg'
import { to as copyTo } from 'pg-copy-streams'
import { commaJoinedLines } from './copy-lines.js'
import { isLostConnection, toStoreError } from './errors.js'
import { Connection, type Statement } from './connection.js'
import { runMigrations } from './migration-runner.js'
import { POSTGRES_MIGRATIONS } from './migrations.js'
import { LISTENER_QUERY_TIMEOUT_MS, VersionWatcher } from './version-watcher.js'

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

export interface PostgresStoreOptions {
  /** Connections in the pool (DATABASE_POOL_SIZE). */
  poolSize?: number
  /** How long to wait for a connection (new or from a busy pool) before answering "unavailable". */
  connectionTimeoutMillis?: number
  /**
   * How long a statement through execute, read or a transaction waits for the server's answer; past
   * it the statement is unavailable and its connection closed. Unset: no bound (the CLI, whose
   * imports run long statements). Migrations and COPY are never bounded by it.
   */
  queryTimeoutMillis?: number
}

/** The PostgreSQL server: its pool, transactions, migrations and the data-version watcher. */
export class PostgresDatabase {
  private readonly pool: pg.Pool
  private readonly poolSize: number
  /** Where the pool connects (host:port), named by unavailability errors. */
  readonly server: string
  /** The database's name on that server. */
  readonly name: string
  /** dataVersion() from memory (LISTEN/NOTIFY on one more connection, outside the pool). */
  readonly versions: VersionWatcher
  private closing: Promise<void> | undefined
  /** Statements and transactions under way: close() lets them finish before it ends the pool. */
  private readonly inFlight = new Set<Promise<unknown>>()
  private readonly queryTimeoutMillis: number | undefined

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.poolSize = options.poolSize ?? 10
    // A connection that stays open but answers nothing (a stalled proxy, a black-holed route) would
    // otherwise hold its statement, its request and its connection for ever; pg then fails the
    // statement, and the pool closes the connection it was given back with that error.
    this.queryTimeoutMillis = options.queryTimeoutMillis
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
    // A client checked out through the promise API gets its listener (Connection) one microtask after
    // the pool hands it over; a connection killed right after it was made can deliver its error
    // in the same socket read as its readiness, within that gap, with no listener at all. Every
    // client of the pool therefore always has one; statements still see their own errors.
    this.pool.on('connect', (client) => client.on('error', () => {}))
    this.versions = new VersionWatcher(
      () => new pg.Client({ ...connection, query_timeout: LISTENER_QUERY_TIMEOUT_MS }),
      async () => (await this.read<{ version: bigint }>('SELECT version FROM data_version WHERE id = 1')).rows[0]!.version,
    )
    // Where the pool connects, for error messages (never the password): pg reads it from the URL
    // and the PG* environment variables, as the pool will. No connection is made.
    const target = new pg.Client({ connectionString: url })
    this.server = `${target.host}:${target.port}`
    this.name = target.database ?? ''
  }

  /** A statement with its query_timeout, when the store has one (queryTimeoutMillis). */
  private readonly timed = (sql: Statement): Statement =>
    // pg reads query_timeout from a query's config too, though its types do not declare it there.
    this.queryTimeoutMillis === undefined ? sql : ({ ...(typeof sql === 'string' ? { text: sql } : sql), query_timeout: this.queryTimeoutMillis } as Statement)

  /** Connections of the pool: for metrics and tests. */
  poolStats(): { total: number; idle: number; waiting: number } {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount }
  }

  /** The backend pid of the data-version listener (outside the pool) while it listens: for tests. */
  versionListenerPid(): number | undefined {
    return this.versions.listenerPid
  }

  /** A driver error as the store throws it: StoreUnavailableError, naming the server, when it is unavailable. */
  readonly toStoreError = (error: unknown): unknown => toStoreError(error, this.server)

  async migrate(): Promise<number[]> {
    // A connection of its own, outside any transaction: see migration-runner.ts.
    const { connection } = await this.checkedOut(async () => ({}), (connection, error) => connection.release(error))
    try {
      const applied = await runMigrations(connection.client, POSTGRES_MIGRATIONS)
      connection.release()
      return applied
    } catch (error) {
      connection.discard() // it may be inside a transaction or still hold the lock
      throw this.toStoreError(error)
    }
  }

  async ping(): Promise<void> {
    await this.read('SELECT 1')
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      // pool.end() would fail a statement still waiting for a connection; one on a connection ends.
      while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight])
      await this.versions.close()
      await this.pool.end()
    })()
    return this.closing
  }

  /** One statement through the pool, classified; never retried (it may have taken effect). */
  execute<R extends pg.QueryResultRow>(sql: Statement, params?: unknown[]): Promise<pg.QueryResult<R>> {
    return this.track(this.pool.query<R>(this.timed(sql) as pg.QueryConfig, params).catch((error: unknown) => Promise.reject(this.toStoreError(error))))
  }

  /**
   * One read-only statement through the pool. When it fails because the pooled connection it used
   * was lost (server restarted, backends terminated, failover), it is tried again: a read cannot have
   * taken effect, and the pool has discarded that connection. Several idle connections can have died
   * at once without the pool knowing yet, so up to one more try than the pool has connections.
   */
  read<R extends pg.QueryResultRow>(sql: Statement, params?: unknown[]): Promise<pg.QueryResult<R>> {
    return this.track(
      (async () => {
        for (let attempt = 0; ; attempt++) {
          try {
            return await this.pool.query<R>(this.timed(sql) as pg.QueryConfig, params)
          } catch (error) {
            if (!isLostConnection(error) || attempt >= this.poolSize) throw this.toStoreError(error)
          }
        }
      })(),
    )
  }

  /**
   * `COPY … TO STDOUT` on a client of its own, its output as comma-joined pages, and the first page
   * (so that a failure to start is thrown here).
   */
  copyOut(sql: string): Promise<{ connection: Connection; pages: AsyncGenerator<Buffer>; first: IteratorResult<Buffer> }> {
    return this.checkedOut(
      async (connection) => {
        const output = connection.client.query(copyTo(sql))
        // The iterator sees the stream's errors while it reads; once it has stopped, pg still reports
        // the discarded connection's end here.
        output.on('error', () => {})
        const pages = this.answered(commaJoinedLines(output), connection)
        try {
          return { pages, first: await pages.next() }
        } catch (error) {
          throw this.toStoreError(error)
        }
      },
      (connection) => connection.discard(),
    )
  }

  /**
   * `pages`, each awaited for at most queryTimeoutMillis (when set): a COPY whose server sends
   * nothing for that long fails as a statement past its query_timeout does, and its connection is
   * closed. Only the wait for the database counts, not the time the reader takes between pages.
   */
  private async *answered(pages: AsyncGenerator<Buffer>, connection: Connection): AsyncGenerator<Buffer> {
    const timeout = this.queryTimeoutMillis
    if (timeout === undefined) return yield* pages
    for (;;) {
      let timer: NodeJS.Timeout | undefined
      const silent = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => {
          connection.discard()
          reject(new Error('Query read timeout')) // as pg says it: unavailable (errors.ts)
        }, timeout)
      })
      let page: IteratorResult<Buffer>
      try {
        page = await Promise.race([pages.next(), silent])
      } finally {
        clearTimeout(timer)
      }
      if (page.done === true) return
      yield page.value
    }
  }

  /**
   * A client of the pool with a transaction begun by `sql` (statements that change nothing; the
   * results of each are returned).
   */
  private begin(sql: Statement): Promise<{ connection: Connection; results: pg.QueryResult[] }> {
    return this.checkedOut(
      async (connection) => {
        // A query of several statements resolves to one result per statement.
        const results = (await connection.query(sql)) as pg.QueryResult | pg.QueryResult[]
        return { results: Array.isArray(results) ? results : [results] }
      },
      (connection, error) => connection.rollbackAndRelease(error),
    )
  }

  /**
   * `start` on a client of the pool, which it keeps. When `start` fails, `abandon` gives the client
   * back; a failure on a lost pooled connection is tried again on another, as a read is.
   */
  private async checkedOut<T>(
    start: (connection: Connection) => Promise<T>,
    abandon: (connection: Connection, error: unknown) => Promise<void> | void,
  ): Promise<T & { connection: Connection }> {
    for (let attempt = 0; ; attempt++) {
      let connection: Connection
      try {
        connection = new Connection(await this.pool.connect(), this.toStoreError, this.timed)
      } catch (error) {
        throw this.toStoreError(error)
      }
      try {
        return { ...(await start(connection)), connection }
      } catch (error) {
        await abandon(connection, error)
        if (!isLostConnection(error) || attempt >= this.poolSize) throw error
      }
    }
  }

  /** BEGIN … COMMIT on one client; any error rolls back and is rethrown (driver errors classified). */
  transaction<T>(work: (connection: Connection) => Promise<T>): Promise<T> {
    return this.track(
      (async () => {
        const { connection } = await this.begin('BEGIN')
        try {
          const result = await work(connection)
          await connection.query('COMMIT')
          connection.release()
          return result
        } catch (error) {
          await connection.rollbackAndRelease(error)
          throw error
        }
      })(),
    )
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work)
    const forget = (): void => void this.inFlight.delete(work)
    work.then(forget, forget)
    return work
  }
}
