import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pg from 'pg'
import { createTestDatabase, POSTGRES_ADMIN_URL, postgresSkipReason, testDatabasePrefix } from './support/postgres.js'

// What the tests create on the PostgreSQL server of TEST_POSTGRES_URL: databases whose names start
// with TEST_DATABASE_PREFIX, dropped at the end (README, Development).
describe('test databases and TEST_DATABASE_PREFIX', () => {
  it('is petstore_test_ unless set; a set prefix is a lower-case identifier start of at most 40 characters', () => {
    assert.equal(testDatabasePrefix({}), 'petstore_test_')
    assert.equal(testDatabasePrefix({ TEST_DATABASE_PREFIX: '' }), 'petstore_test_')
    for (const prefix of ['ci_', 'alice_petstore_', '_x', 'a'.repeat(40)]) assert.equal(testDatabasePrefix({ TEST_DATABASE_PREFIX: prefix }), prefix)
    for (const prefix of ['Petstore_', '1_', 'pet-store_', 'pet store', 'x"; DROP DATABASE postgres; --', 'a'.repeat(41)]) {
      assert.throws(() => testDatabasePrefix({ TEST_DATABASE_PREFIX: prefix }), /^Error: TEST_DATABASE_PREFIX must be 1 to 40 lower-case letters/, prefix)
    }
  })

  it('creates its databases with the prefix on that server, and drops them', async (t) => {
    const reason = await postgresSkipReason()
    if (reason !== undefined) return t.skip(reason)
    const before = process.env.TEST_DATABASE_PREFIX
    process.env.TEST_DATABASE_PREFIX = 'petstore_prefix_check_'
    let database
    try {
      database = await createTestDatabase()
    } finally {
      if (before === undefined) delete process.env.TEST_DATABASE_PREFIX
      else process.env.TEST_DATABASE_PREFIX = before
    }
    const name = new URL(database.url).pathname.slice(1)
    assert.match(name, new RegExp(`^petstore_prefix_check_${process.pid}_[0-9a-f]{8}$`))
    assert.equal(new URL(database.url).host, new URL(POSTGRES_ADMIN_URL).host)
    const exists = async (): Promise<boolean> => {
      const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL })
      await admin.connect()
      try {
        return (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1
      } finally {
        await admin.end()
      }
    }
    assert.equal(await exists(), true)
    await database.drop()
    assert.equal(await exists(), false)
  })
})
