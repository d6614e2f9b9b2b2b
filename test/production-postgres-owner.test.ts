import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pg from 'pg'
import { assertOk, cli } from './support/cli.js'
import { bearer } from './support/harness.js'
import { POSTGRES_ADMIN_URL, postgresSkipReason, testDatabasePrefix } from './support/postgres.js'
import { spawnServer } from './support/server-process.js'

// docs/production.md's PostgreSQL recipe: a user that owns the database, and nothing more, runs
// every migration, an import (its VACUUM), the CLI and `serve`. Its SQL is run as written, the
// names and password replaced, on the test server; the role and database are dropped at the end.
const DOC = readFileSync(new URL('../docs/production.md', import.meta.url), 'utf8')

function recipeSql(): string[] {
  const section = DOC.slice(DOC.indexOf('\n## PostgreSQL\n'))
  const block = /```sql\n([\s\S]*?)```/.exec(section)
  assert.ok(block !== null, 'docs/production.md gives the SQL that creates the user and the database')
  return block[1]!.split(';').map((statement) => statement.trim()).filter((statement) => statement !== '')
}

describe("docs/production.md: the database's owner is all the service needs", async () => {
  const reason = await postgresSkipReason()
  const name = `${testDatabasePrefix()}owner_${randomBytes(4).toString('hex')}`
  const password = randomBytes(12).toString('hex')
  let admin: pg.Client
  let url: string
  let dir: string

  before(async () => {
    if (reason !== undefined) return
    admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL })
    await admin.connect()
    for (const statement of recipeSql()) await admin.query(statement.replace(/\bpetstore\b/g, name).replace("'secret'", `'${password}'`))
    const server = new URL(POSTGRES_ADMIN_URL)
    url = `postgres://${name}:${password}@${server.host}/${name}`
    dir = mkdtempSync(join(tmpdir(), 'petstore-owner-'))
  })

  after(async () => {
    if (reason !== undefined) return
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.query(`DROP ROLE IF EXISTS ${name}`)
    await admin.end()
    rmSync(dir, { recursive: true, force: true })
  })

  it('creates a login user that is no superuser, and a database it owns', { skip: reason }, async () => {
    const { rows } = await admin.query<{ super: boolean; login: boolean; owner: string }>(
      'SELECT r.rolsuper AS super, r.rolcanlogin AS login, pg_get_userbyid(d.datdba) AS owner FROM pg_roles r, pg_database d WHERE r.rolname = $1 AND d.datname = $1',
      [name],
    )
    assert.deepEqual(rows, [{ super: false, login: true, owner: name }])
  })

  it('migrates, imports, creates a key and serves as that user', { skip: reason }, async () => {
    const env = { DATABASE_URL: url }
    assertOk(await cli(['migrate'], env))
    const file = join(dir, 'orders.ndjson')
    writeFileSync(file, '{"id": 1, "petId": 7, "quantity": 2, "shipDate": "2026-12-01T09:00:00Z"}\n')
    assertOk(await cli(['orders', 'import', file], env)) // its VACUUM (ANALYZE) as the owner
    const created = await cli(['keys', 'create', '--name', 'owner-check'], env)
    assertOk(created)
    const server = await spawnServer(url)
    try {
      const listed = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(created.stdout.trim()) })
      assert.equal(listed.status, 200)
      assert.match(await listed.text(), /^\[\{"id":1,/)
      assert.equal((await fetch(`${server.origin}/readyz`)).status, 200)
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
    }
    assert.doesNotMatch(server.output(), /"level":(40|50|60)/, 'no warning or error logged')
  })
})
