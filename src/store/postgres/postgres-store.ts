import type { Store } from '../store.js'
import { PostgresApiKeysRepository } from './api-keys-repository.js'
import { PostgresDatabase, type PostgresStoreOptions } from './database.js'
import { PostgresOrderEventsRepository } from './order-events-repository.js'
import { readCursorSecret } from './order-pages.js'
import { PostgresOrdersRepository } from './orders-repository.js'
import { PostgresPetsRepository } from './pets-repository.js'
import { PostgresWebhooksRepository } from './webhooks-repository.js'

export type { PostgresStoreOptions } from './database.js'

/** A PostgreSQL database shared by any number of instances; its repositories share one pool. */
export class PostgresStore implements Store {
  readonly kind = 'postgres'
  readonly orders: PostgresOrdersRepository
  readonly apiKeys: PostgresApiKeysRepository
  readonly pets: PostgresPetsRepository
  readonly events: PostgresOrderEventsRepository
  readonly webhooks: PostgresWebhooksRepository
  private readonly database: PostgresDatabase
  private closing: Promise<void> | undefined

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.database = new PostgresDatabase(url, options)
    this.orders = new PostgresOrdersRepository(this.database)
    this.apiKeys = new PostgresApiKeysRepository(this.database)
    this.pets = new PostgresPetsRepository(this.database)
    this.events = new PostgresOrderEventsRepository(this.database)
    this.webhooks = new PostgresWebhooksRepository(this.database)
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

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.orders.close()
      await this.database.close()
    })()
    return this.closing
  }
}
