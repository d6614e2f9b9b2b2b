import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'

export type StoreKind = 'sqlite' | 'postgres'

/** `value` as a store kind, or an error naming `what` it came from (an argument, a variable). */
export function storeKind(value: string, what: string): StoreKind {
  if (value !== 'sqlite' && value !== 'postgres') throw new Error(`${what} must be sqlite or postgres, got "${value}"`)
  return value
}

/** Where PostgreSQL is: the machine's server (trust auth), as the tests use it. */
const POSTGRES_ADMIN_URL = process.env.BENCH_POSTGRES_URL ?? process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

/** A database made for one bench run, dropped (or deleted) at its end. */
export interface BenchDatabase {
  kind: StoreKind
  /** DATABASE_URL for the servers. */
  url: string
  /** The orders in `[from, to]` that are cancelled. */
  countCancelled(from: number, to: number): Promise<number>
  /** Runs bench-only SQL (e.g. DDL between runs, while no server uses the database), in one transaction. */
  execute(sql: string): Promise<void>
  /** The first column of the first row of a query that returns one integer; `?` (SQLite) or `$1` (PostgreSQL) parameters. */
  count(sql: string, params?: (number | string)[]): Promise<number>
  /** Transactions committed or rolled back in this database so far (PostgreSQL only). */
  transactions?(): Promise<number>
  drop(): Promise<void>
}

const made = new Set<BenchDatabase>()

/** Drops every database still there (on the bench's exit, whatever the reason). */
export async function dropAllDatabases(): Promise<void> {
  await Promise.allSettled([...made].map((database) => database.drop()))
}

export function createSqliteDatabase(): BenchDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'))
  const path = join(dir, 'petstore.db')
  const database: BenchDatabase = {
    kind: 'sqlite',
    url: `sqlite:${path}`,
    async countCancelled(from, to) {
      const db = new Database(path, { readonly: true })
      try {
        const row = db.prepare(`SELECT count(*) AS n FROM orders WHERE id BETWEEN ? AND ? AND status = 'cancelled'`).get(from, to) as { n: number }
        return row.n
      } finally {
        db.close()
      }
    },
    async execute(sql) {
      const db = new Database(path)
      try {
        db.pragma('busy_timeout = 10000')
        db.transaction(() => db.exec(sql)).immediate()
      } finally {
        db.close()
      }
    },
    async count(sql, params = []) {
      const db = new Database(path, { readonly: true })
      try {
        return Number(db.prepare(sql).pluck().get(...params))
      } finally {
        db.close()
      }
    },
    async drop() {
      made.delete(database)
      rmSync(dir, { recursive: true, force: true })
    },
  }
  made.add(database)
  return database
}

/** Undefined when PostgreSQL answers, else why it cannot be used. */
export async function postgresUnavailable(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 2000 })
  try {
    await client.connect()
    await client.query('SELECT 1')
    return undefined
  } catch (error) {
    return `PostgreSQL is not reachable at ${POSTGRES_ADMIN_URL}: ${(error as Error).message}`
  } finally {
    await client.end().catch(() => {})
  }
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

export async function createPostgresDatabase(): Promise<BenchDatabase> {
  const name = `petstore_bench_${process.pid}_${randomBytes(4).toString('hex')}`
  await withClient(POSTGRES_ADMIN_URL, (admin) => admin.query(`CREATE DATABASE ${name}`))
  const url = new URL(POSTGRES_ADMIN_URL)
  url.pathname = `/${name}`
  let dropped = false
  const database: BenchDatabase = {
    kind: 'postgres',
    url: url.toString(),
    countCancelled: (from, to) =>
      withClient(url.toString(), async (client) => {
        const { rows } = await client.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM orders WHERE id BETWEEN $1 AND $2 AND status = 'cancelled'`,
          [from, to],
        )
        return rows[0]!.n
      }),
    execute: (sql) =>
      withClient(url.toString(), async (client) => {
        await client.query(`BEGIN; ${sql}; COMMIT`)
      }),
    count: (sql, params = []) =>
      withClient(url.toString(), async (client) => {
        const { rows } = await client.query<Record<string, string | number>>(sql, params)
        return Number(Object.values(rows[0]!)[0])
      }),
    // Counted by the server's statistics, which a backend reports when it ends or goes idle: read
    // them once the server under test has closed its connections.
    // Backends report their counts when they exit, a moment after their client closed the
    // connection: read until two readings 300 ms apart agree (at most 5 s).
    transactions: () =>
      withClient(POSTGRES_ADMIN_URL, async (client) => {
        const read = async (): Promise<number> => {
          const { rows } = await client.query<{ n: string }>(
            'SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1',
            [name],
          )
          return Number(rows[0]!.n)
        }
        let previous = await read()
        for (let i = 0; i < 16; i++) {
          await new Promise((resolve) => setTimeout(resolve, 300))
          const now = await read()
          if (now === previous) break
          previous = now
        }
        return previous
      }),
    async drop() {
      if (dropped) return
      dropped = true
      made.delete(database)
      await withClient(POSTGRES_ADMIN_URL, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
    },
  }
  made.add(database)
  return database
}
