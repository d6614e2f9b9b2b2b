import type pg from 'pg'
import { isUnavailable } from './errors.js'

/** A statement: its text, or a query config (rows as arrays, its own type parsers). */
export type Statement = string | pg.QueryConfig | pg.QueryArrayConfig

/**
 * A connection checked out of the pool for several statements (a transaction, a cursor). Not to be
 * confused with a webhook endpoint's delivery lease (WebhookLease), which is a row's claim.
 */
export class Connection {
  // Between two statements nobody listens to a checked-out client; a connection dying then would be
  // an unhandled 'error' event, which ends the process. The next statement fails and says why.
  private readonly onIdleError = (): void => {}
  private released = false

  constructor(
    readonly client: pg.PoolClient,
    /** The store's classification of driver errors (names the server). */
    private readonly toStoreError: (error: unknown) => unknown,
    /** A statement as the store sends it: with its query_timeout, when it has one. */
    private readonly timed: (sql: Statement) => Statement = (sql) => sql,
  ) {
    client.on('error', this.onIdleError)
  }

  /** Runs one statement; a driver error meaning "unavailable" comes out as StoreUnavailableError. */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: Statement, params?: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      // A QueryArrayConfig's rows are arrays: its callers say so in R.
      return await this.client.query<R>(this.timed(sql) as string | pg.QueryConfig, params)
    } catch (error) {
      throw this.toStoreError(error)
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
