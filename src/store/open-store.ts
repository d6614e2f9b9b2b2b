import type { DatabaseConfig } from '../config.js'
import { SqliteStore } from './sqlite/sqlite-store.js'
import type { Store } from './store.js'

/** The store DATABASE_URL names. */
export async function openStore(database: DatabaseConfig): Promise<Store> {
  if (database.kind === 'sqlite') return new SqliteStore(database.path)
  throw new Error('DATABASE_URL: the PostgreSQL store is not built yet')
}
