import Database from 'better-sqlite3'
import pg from 'pg'
import type { TestDatabaseHandle } from './harness.js'

/** SQL on a connection of its own (not the store's): the same text runs on both databases. */
export interface Sql {
  query<R>(text: string): Promise<R[]>
  close(): Promise<void>
}

export async function connectSql(database: TestDatabaseHandle): Promise<Sql> {
  if (database.config.kind === 'sqlite') {
    const db = new Database(database.config.path)
    return {
      query: async <R>(text: string) => (db.prepare(text).reader ? (db.prepare(text).all() as R[]) : (db.exec(text), [])),
      close: async () => void db.close(),
    }
  }
  const client = new pg.Client({ connectionString: database.url })
  await client.connect()
  return {
    query: async <R>(text: string) => (await client.query(text)).rows as R[],
    close: () => client.end(),
  }
}
