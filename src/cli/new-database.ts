import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { secretSource, type DatabaseConfig } from '../config.js'

/**
 * The SQLite file that opening `database` would create, or undefined (it exists, or the database is
 * PostgreSQL). A command that sets a database up creates it and says so; any other refuses it, as a
 * run from another folder or a mistyped path would otherwise answer from a new, empty database.
 */
export function databaseToCreate(database: DatabaseConfig): string | undefined {
  if (database.kind !== 'sqlite') return undefined
  const path = resolve(database.path)
  return existsSync(path) ? undefined : path
}

/** What to say on stderr once the database at `path` was created; undefined when it was not. */
export function databaseCreatedNotice(env: Record<string, string | undefined>, path: string | undefined): string | undefined {
  if (path === undefined || !existsSync(path)) return undefined
  return `created a new SQLite database at ${path} (${whence(env)})`
}

/**
 * The error of a command that does not create a database (all but serve, migrate, seed and the
 * imports) given the path `path` of a SQLite file that does not exist.
 */
export function databaseMissingMessage(env: Record<string, string | undefined>, path: string): string {
  return `no SQLite database at ${path} (${whence(env)}); only serve, migrate, seed and the imports create one`
}

function whence(env: Record<string, string | undefined>): string {
  const source = secretSource(env, 'DATABASE_URL')
  return source === undefined ? 'DATABASE_URL is unset' : `named by ${source}`
}
