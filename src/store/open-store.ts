import type { DatabaseConfig } from '../config.js'
import { SqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js'
import type { PostgresStoreOptions } from './postgres/postgres-store.js'
import type { Store } from './store.js'

export { removeUnusedDatabase, SqliteFileMissingError } from './sqlite/database.js'

/** The store DATABASE_URL names, with the options of its kind. */
export async function openStore(
  database: DatabaseConfig,
  sqlite: SqliteStoreOptions = {},
  postgres: Pick<PostgresStoreOptions, 'connectionTimeoutMillis' | 'queryTimeoutMillis'> = {},
): Promise<Store> {
  if (database.kind === 'sqlite') return new SqliteStore(database.path, sqlite)
  // Loaded only when used: a SQLite deployment never loads pg.
  const { PostgresStore } = await import('./postgres/postgres-store.js')
  return new PostgresStore(database.url, { poolSize: database.poolSize, ...postgres })
}
