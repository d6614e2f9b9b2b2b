import { setTimeout as sleep } from 'node:timers/promises'
import type pg from 'pg'
import { pendingMigrations, type Migration } from '../store.js'
import { MIGRATION_LOCK_KEY, SCHEMA_MIGRATIONS_TABLE } from './migrations.js'

const LOCK_POLL_MS = 100
const CONCURRENT_INDEX = /^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)/i

/**
 * Applies the pending migrations on `client` (a connection of its own, outside any transaction);
 * returns the versions applied. Instances migrate one at a time under a session-level advisory lock.
 *
 * Consecutive migrations run in one transaction, as before; one marked `transaction: false` (such as
 * `CREATE INDEX CONCURRENTLY`, which builds an index without blocking writes) runs on its own,
 * outside any transaction, and is recorded once it has succeeded. The lock is waited for by polling
 * `pg_try_advisory_lock`, never by a statement that blocks: a CONCURRENTLY build waits for every
 * transaction older than it, so an instance waiting for the lock inside a statement (a transaction)
 * would deadlock with the build it waits for. A build that was interrupted (a killed process, a lost
 * connection) leaves its index INVALID: it is dropped and built again, so `migrate` resumes it.
 */
export async function runMigrations(client: pg.ClientBase, migrations: readonly Migration[]): Promise<number[]> {
  while (!(await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS locked', [MIGRATION_LOCK_KEY])).rows[0]!.locked) {
    await sleep(LOCK_POLL_MS)
  }
  try {
    await client.query(SCHEMA_MIGRATIONS_TABLE)
    const { rows } = await client.query<{ v: number }>('SELECT coalesce(max(version), 0)::int AS v FROM schema_migrations')
    const applied: number[] = []
    let inTransaction = false
    for (const migration of pendingMigrations(migrations, rows[0]?.v ?? 0)) {
      if (migration.transaction === false) {
        if (inTransaction) await client.query('COMMIT')
        inTransaction = false
        await dropInterruptedIndex(client, migration)
      } else if (!inTransaction) {
        await client.query('BEGIN')
        inTransaction = true
      }
      await client.query(migration.sql)
      await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
      applied.push(migration.version)
    }
    if (inTransaction) await client.query('COMMIT')
    return applied
  } finally {
    // After a failure the caller discards the connection, which ends its transaction and its lock.
    await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]).catch(() => {})
  }
}

/** Drops the INVALID index an interrupted run of this `CREATE INDEX CONCURRENTLY` migration left. */
async function dropInterruptedIndex(client: pg.ClientBase, migration: Migration): Promise<void> {
  const index = CONCURRENT_INDEX.exec(migration.sql)?.[1]
  if (index === undefined) return
  const { rows } = await client.query(
    `SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace AND NOT i.indisvalid`,
    [index],
  )
  if (rows.length > 0) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`)
}
