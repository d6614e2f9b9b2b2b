import { randomBytes } from 'node:crypto'
import pg from 'pg'

/** Where the test PostgreSQL server is; a database of its own is created per test file. */
export const POSTGRES_ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

export type TestDatabase = { url: string; drop(): Promise<void> }

const DEFAULT_DATABASE_PREFIX = 'petstore_test_'
// An unquoted SQL identifier's start, in lower case (PostgreSQL folds the names to it), short enough
// that the pid and 8 hex digits after it stay within PostgreSQL's 63 bytes.
const DATABASE_PREFIX = /^[a-z_][a-z0-9_]{0,39}$/

/**
 * What the name of every database the tests create starts with: TEST_DATABASE_PREFIX, or
 * `petstore_test_`. Anything else than a lower-case identifier's start of at most 40 characters is
 * refused, naming the variable, before any database is created.
 */
export function testDatabasePrefix(env: NodeJS.ProcessEnv = process.env): string {
  const prefix = env.TEST_DATABASE_PREFIX === undefined || env.TEST_DATABASE_PREFIX === '' ? DEFAULT_DATABASE_PREFIX : env.TEST_DATABASE_PREFIX
  if (!DATABASE_PREFIX.test(prefix)) {
    throw new Error(
      `TEST_DATABASE_PREFIX must be 1 to 40 lower-case letters, digits and underscores, not starting with a digit (default ${DEFAULT_DATABASE_PREFIX}); got ${JSON.stringify(prefix)}`,
    )
  }
  return prefix
}

let reachable: Promise<string | undefined> | undefined

/** Undefined when PostgreSQL answers, else the reason it cannot be used. */
function postgresUnavailable(): Promise<string | undefined> {
  reachable ??= (async () => {
    // A loaded machine can be slow to accept a connection: give it a few tries before calling
    // PostgreSQL unreachable.
    let reason: string | undefined
    for (let attempt = 0; attempt < 3; attempt++) {
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5000 })
      try {
        await client.connect()
        await client.query('SELECT 1')
        return undefined
      } catch (error) {
        reason = `PostgreSQL is not reachable at ${POSTGRES_ADMIN_URL}: ${(error as Error).message}`
      } finally {
        await client.end().catch(() => {})
      }
    }
    return reason
  })()
  return reachable
}

/**
 * The reason PostgreSQL tests are skipped, printed at run time, or undefined to run them. With
 * REQUIRE_POSTGRES=1 (CI) an unreachable server is an error, never a skip.
 */
export async function postgresSkipReason(): Promise<string | undefined> {
  const reason = await postgresUnavailable()
  if (reason !== undefined && process.env.REQUIRE_POSTGRES === '1') {
    throw new Error(`REQUIRE_POSTGRES=1 but ${reason}`)
  }
  if (reason !== undefined) console.log(`# skipping PostgreSQL tests: ${reason}`)
  return reason
}

/**
 * A fresh, empty database on the server of TEST_POSTGRES_URL, named `<TEST_DATABASE_PREFIX><pid>_<8 hex>`;
 * `drop()` removes it (and ends any connection left to it).
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `${testDatabasePrefix()}${process.pid}_${randomBytes(4).toString('hex')}`
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const url = new URL(POSTGRES_ADMIN_URL)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL })
      await client.connect()
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await client.end()
      }
    },
  }
}
