/**
 * Where `serve --demo` keeps its demo key, so that every start prints the same one: a `KEY=` set in
 * a shell keeps working across restarts, and restarting one instance never breaks the clients of
 * another on the same PostgreSQL database.
 *
 * The key's text is a credential: the file is written 0600 (its directory 0700 when created here),
 * atomically (a temporary file renamed over it), and read back only by the demo.
 */
import { createHash } from 'node:crypto'
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import type { DatabaseConfig } from '../config.js'

/**
 * The file of a database's demo key. SQLite: beside the database file (`petstore.db` →
 * `petstore.db.demo-key`). PostgreSQL: `data/` under the working directory, one file per database
 * (host, port and database name; never the password), so two databases never share a key.
 */
export function demoKeyPath(database: DatabaseConfig, cwd: string = process.cwd()): string {
  if (database.kind === 'sqlite') return `${resolve(cwd, database.path)}.demo-key`
  const url = new URL(database.url)
  const name = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username) || 'postgres'
  const identity = `${url.hostname.toLowerCase() || 'localhost'}:${url.port || '5432'}/${name}`
  const digest = createHash('sha256').update(identity).digest('hex').slice(0, 16)
  return join(resolve(cwd, 'data'), `postgres-${digest}.demo-key`)
}

/** The key stored at `path`, or undefined when there is none (or the file holds no key). */
export async function readDemoKey(path: string): Promise<string | undefined> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  const secret = text.trim()
  if (secret === '') return undefined
  await chmod(path, 0o600) // a copy someone widened is narrowed again: it is a credential
  return secret
}

/** Stores `secret` at `path`, mode 0600, replacing the file whole. */
export async function writeDemoKey(path: string, secret: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 })
  const temporary = `${path}.${process.pid}.tmp`
  try {
    await writeFile(temporary, `${secret}\n`, { mode: 0o600, flag: 'wx' })
    await rename(temporary, path)
  } catch (error) {
    await rm(temporary, { force: true })
    throw error
  }
}
