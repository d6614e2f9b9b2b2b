import type { Store } from '../store.js'
import { PostgresApiKeysRepository } from './api-keys-repository.js'
import { PostgresDatabase, type PostgresStoreOptions } from './database.js'
import { PostgresOrderEventsRepository } from './order-events-repository.js'
import { readCursorSecret } from './order-pages.js'
import { PostgresOrdersRepository } from './orders-repository.js'
import { PostgresPetsRepository } from './pets-repository.js'
import { PostgresWebhooksRepository } from './webhooks-repository.js'

export type { PostgresStoreOptions } from './database.js'

/**
 * Connections of the webhook dispatcher's own pool: deliveries never queue for a connection ahead
 * of an API request (a loop per endpoint writes after every event), and 4 carry thousands of
 * deliveries a second.
 */
const WEBHOOKS_POOL_SIZE = 4

/**
 * A PostgreSQL database shared by any number of instances. The API's repositories share one pool;
 * webhooks have a small pool of their own (opened on first use).
 */
export class PostgresStore implements Store {
  readonly kind = 'postgres'
  readonly location: string
  readonly orders: PostgresOrdersRepository
  readonly apiKeys: PostgresApiKeysRepository
  readonly pets: PostgresPetsRepository
  readonly events: PostgresOrderEventsRepository
  readonly webhooks: PostgresWebhooksRepository
  private readonly database: PostgresDatabase
  private readonly webhooksDatabase: PostgresDatabase
  private closing: Promise<void> | undefined

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.database = new PostgresDatabase(url, options)
    this.location = `postgres ${this.database.server}/${this.database.name}`
    this.orders = new PostgresOrdersRepository(this.database)
    this.apiKeys = new PostgresApiKeysRepository(this.database)
    this.pets = new PostgresPetsRepository(this.database)
    this.events = new PostgresOrderEventsRepository(this.database)
    this.webhooksDatabase = new PostgresDatabase(url, { ...options, poolSize: WEBHOOKS_POOL_SIZE })
    this.webhooks = new PostgresWebhooksRepository(this.webhooksDatabase)
  }

  /** Connections of the pool: for metrics and tests. */
  poolStats(): { total: number; idle: number; waiting: number } {
    return this.database.poolStats()
  }

  /** The backend pid of the data-version listener (outside the pool) while it listens: for tests. */
  versionListenerPid(): number | undefined {
    return this.database.versionListenerPid()
  }

  migrate(): Promise<number[]> {
    return this.database.migrate()
  }

  ping(): Promise<void> {
    return this.database.ping()
  }

  cursorSecret(): Promise<Buffer> {
    return readCursorSecret((sql, params) => this.database.read(sql, params))
  }

  async backupTo(): Promise<void> {
    throw new Error('a PostgreSQL database is backed up with its own tools: pg_dump (docs/deploy.md, Backups)')
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.orders.close()
      await Promise.all([this.database.close(), this.webhooksDatabase.close()])
    })()
    return this.closing
  }
}
