import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { StoreUnavailableError, type Store } from '../store.js'
import { SqliteApiKeysRepository } from './api-keys-repository.js'
import { classified, SqliteDatabase, type SqliteStoreOptions } from './database.js'
import { SqliteOrderEventsRepository } from './order-events-repository.js'
import { SqliteOrdersRepository } from './orders-repository.js'
import { readCursorSecret } from './order-pages.js'
import { SqlitePetsRepository } from './pets-repository.js'
import { SqliteWebhooksRepository } from './webhooks-repository.js'

export type { SqliteStoreOptions } from './database.js'

/** The embedded store: one SQLite file (WAL), its repositories sharing its connections. */
export class SqliteStore implements Store {
  readonly kind = 'sqlite'
  readonly path: string
  readonly location: string
  readonly orders: SqliteOrdersRepository
  readonly apiKeys: SqliteApiKeysRepository
  readonly pets: SqlitePetsRepository
  readonly events: SqliteOrderEventsRepository
  readonly webhooks: SqliteWebhooksRepository
  private readonly database: SqliteDatabase
  private closed = false

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.path = path
    this.location = `sqlite ${resolve(path)}`
    this.database = new SqliteDatabase(path, options)
    this.orders = new SqliteOrdersRepository(this.database)
    this.apiKeys = new SqliteApiKeysRepository(this.database)
    this.pets = new SqlitePetsRepository(this.database)
    this.events = new SqliteOrderEventsRepository(this.database)
    this.webhooks = new SqliteWebhooksRepository(this.database)
  }

  migrate(): Promise<number[]> {
    return this.database.migrate()
  }

  async ping(): Promise<void> {
    this.database.readVersion() // a read of the database, as list requests make
    // An open connection reads on from a file removed under it: the database is gone all the same.
    if (!existsSync(this.database.path)) throw new StoreUnavailableError(`SQLite is unavailable (${this.database.path} is gone)`)
  }

  async cursorSecret(): Promise<Buffer> {
    return classified(() => readCursorSecret(this.database.db))
  }

  backupTo(path: string, signal?: AbortSignal): Promise<void> {
    return this.database.backupTo(path, signal)
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.all([this.orders.close(), this.webhooks.drain()])
    this.database.close()
  }
}
