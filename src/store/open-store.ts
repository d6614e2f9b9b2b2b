import type { DatabaseConfig } from '../config.js'
import { SqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js'
import type { Store } from './store.js'

export { SqliteFileMissingError } from './sqlite/database.js'

/** The store DATABASE_URL names. */
export async function openStore(database: DatabaseConfig, sqlite: SqliteStoreOptions = {}): Promise<Store> {
  if (database.kind === 'sqlite') return new SqliteStore(database.path, sqlite)
  // Loaded only when used: a SQLite deployment never loads pg.
  const { PostgresStore } = await import('./postgres/postgres-store.js')
  return new PostgresStore(database.url, { poolSize: database.poolSize })
}
