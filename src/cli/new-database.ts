import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { DatabaseConfig } from '../config.js'

/**
 * The SQLite file that opening `database` will create, or undefined (it exists, or the database is
 * PostgreSQL). Opening a missing file creates it, so a command run from another folder would
 * otherwise start an empty database there without a word.
 */
export function databaseToCreate(database: DatabaseConfig): string | undefined {
  if (database.kind !== 'sqlite') return undefined
  const path = resolve(database.path)
  return existsSync(path) ? undefined : path
}

/** What to say on stderr once the database at `path` was created; undefined when it was not. */
export function databaseCreatedNotice(env: Record<string, string | undefined>, path: string | undefined): string | undefined {
  if (path === undefined || !existsSync(path)) return undefined
  const how = env.DATABASE_URL === undefined || env.DATABASE_URL === '' ? 'DATABASE_URL is unset' : 'named by DATABASE_URL'
  return `created a new SQLite database at ${path} (${how})`
}
