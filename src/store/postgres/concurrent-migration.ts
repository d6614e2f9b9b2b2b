import type pg from 'pg'
import type { Migration } from '../store.js'
import { MIGRATION_LOCK_KEY } from './migrations.js'

const CONCURRENT_INDEX = /^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)/i

/**
 * Applies one migration that must run outside a transaction (`transaction: false`), such as
 * `CREATE INDEX CONCURRENTLY`, which builds an index without blocking writes. Returns whether it
 * applied it (false: another instance had).
 *
 * The session-level form of the migration lock is held meanwhile, so instances migrate one at a time
 * as they do in a transaction. A CONCURRENTLY build that was interrupted (a killed process, a lost
 * connection) leaves its index INVALID: it is dropped and built again, so a migration is resumed by
 * simply running `migrate` again. The migration is recorded only once its statement has succeeded.
 */
export async function applyOutsideTransaction(client: pg.ClientBase, migration: Migration): Promise<boolean> {
  await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY])
  try {
    const { rows } = await client.query('SELECT 1 FROM schema_migrations WHERE version = $1', [migration.version])
    if (rows.length > 0) return false
    const index = CONCURRENT_INDEX.exec(migration.sql)?.[1]
    if (index !== undefined && (await isInvalidIndex(client, index))) {
      await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`)
    }
    await client.query(migration.sql)
    await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
    return true
  } finally {
    await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY])
  }
}

/** True when an index of this name exists, in the current schema, and is not valid (an interrupted build). */
export async function isInvalidIndex(client: pg.ClientBase, name: string): Promise<boolean> {
  const { rows } = await client.query(
    `SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace AND NOT i.indisvalid`,
    [name],
  )
  return rows.length > 0
}
