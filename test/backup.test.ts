import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import { assertOk, assertOneLineError, cli } from './support/cli.js'
import { startDemo } from './support/demo.js'
import { place } from './support/place.js'
import { createTestDatabase, postgresSkipReason } from './support/postgres.js'
import { BIN, spawnServer } from './support/server-process.js'

// `petstore-orders backup FILE`: an online copy of the SQLite database, taken while a server keeps
// writing, that is itself a database the service serves.

const dir = mkdtempSync(join(tmpdir(), 'petstore-backup-'))
after(() => rmSync(dir, { recursive: true, force: true }))

describe('backup of a SQLite database in use', () => {
  const source = join(dir, 'orders.db')
  let demo: Awaited<ReturnType<typeof startDemo>>
  let origin: string
  before(async () => {
    demo = await startDemo({ DATABASE_URL: `sqlite:${source}` }, dir)
    origin = new URL(demo.url).origin
  })
  after(async () => demo.stop())

  it('copies every order acknowledged before it, while places keep committing, into a new 0600 file that serves as a database', async () => {
    const placedBefore: string[] = []
    for (let n = 1; n <= 20; n++) {
      const answer = await place(origin, demo.key, `{"petId":${n},"quantity":1}`)
      assert.equal(answer.status, 201, answer.text)
      placedBefore.push(answer.body.id)
    }
    // Places go on during the backup: it must neither wait for them nor stop them.
    let placing = true
    let placedDuring = 0
    const writer = (async () => {
      while (placing) {
        if ((await place(origin, demo.key, '{"petId":99,"quantity":2}')).status === 201) placedDuring++
      }
    })()
    const file = join(dir, 'copy.db')
    const result = await cli(['backup', file], { DATABASE_URL: `sqlite:${source}` })
    placing = false
    await writer
    assertOk(result)
    assert.equal(result.stderr, `petstore-orders: backed up the database to ${file}\n`)
    assert.ok(placedDuring > 0, 'no place committed while the backup ran')
    assert.equal(statSync(file).mode & 0o777, 0o600)
    assert.deepEqual(readdirSync(dir).filter((name) => name.includes('.partial')), [])

    const copy = new Database(file, { readonly: true })
    try {
      assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok')
      const ids = new Set((copy.prepare('SELECT id FROM orders').safeIntegers().pluck().all() as bigint[]).map(String))
      for (const id of placedBefore) assert.ok(ids.has(id), `order ${id}, acknowledged before the backup, is not in it`)
      // Every order in the copy has its event: one snapshot, not a copy torn across commits.
      const orphans = copy.prepare("SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM order_events e WHERE e.order_id = o.id)").pluck().get()
      assert.equal(orphans, 0)
    } finally {
      copy.close()
    }
    const restored = await spawnServer(`sqlite:${file}`)
    try {
      const response = await fetch(`${restored.origin}/v2/store/orders/${placedBefore[0]}`, { headers: { authorization: `Bearer ${demo.key}` } })
      assert.equal(response.status, 200)
    } finally {
      restored.child.kill('SIGTERM')
      await restored.exited
    }
  })

  it('refuses a FILE that exists, leaving it as it was', async () => {
    const file = join(dir, 'taken.db')
    assertOk(await cli(['backup', file], { DATABASE_URL: `sqlite:${source}` }))
    const before = readFileSync(file)
    assertOneLineError(await cli(['backup', file], { DATABASE_URL: `sqlite:${source}` }), 1, /taken\.db exists: a backup never replaces a file/)
    assert.deepEqual(readFileSync(file), before)
  })

  it('refuses a FILE whose folder does not exist, creating nothing', async () => {
    const file = join(dir, 'missing', 'copy.db')
    assertOneLineError(await cli(['backup', file], { DATABASE_URL: `sqlite:${source}` }), 1, /its folder does not exist/)
    assert.equal(existsSync(join(dir, 'missing')), false)
  })

  it('refuses an empty FILE and `-` as a usage error, writing nothing', async () => {
    for (const given of ['', '-']) {
      assertOneLineError(await cli(['backup', given], { DATABASE_URL: `sqlite:${source}` }, dir), 2, /FILE must name a new file/)
    }
    assert.equal(existsSync(join(dir, '-')), false)
  })

  it('refuses a database that does not exist, creating neither it nor FILE', async () => {
    const file = join(dir, 'never.db')
    assertOneLineError(await cli(['backup', file], { DATABASE_URL: `sqlite:${join(dir, 'absent.db')}` }), 1, /no SQLite database at/)
    assert.equal(existsSync(file), false)
    assert.equal(existsSync(join(dir, 'absent.db')), false)
  })
})

describe('backup of a PostgreSQL database', () => {
  it('is refused with one line naming pg_dump, and writes nothing', async (t) => {
    const reason = await postgresSkipReason()
    if (reason !== undefined) return t.skip(reason)
    const database = await createTestDatabase()
    try {
      assertOk(await cli(['migrate'], { DATABASE_URL: database.url }))
      const file = join(dir, 'pg.db')
      assertOneLineError(await cli(['backup', file], { DATABASE_URL: database.url }), 1, /pg_dump/)
      assert.equal(existsSync(file), false)
    } finally {
      await database.drop()
    }
  })
})

describe('a backup interrupted', () => {
  const source = join(dir, 'large.db')
  before(async () => {
    assertOk(await cli(['migrate'], { DATABASE_URL: `sqlite:${source}` }))
    // Large enough that its copy takes a while: 400,000 orders with a 200-character note each.
    const db = new Database(source)
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400000)
      INSERT INTO orders (id, pet_id, quantity, status, complete, metadata) SELECT i, 1, 1, 'pending', 0, json_object('note', printf('%.200c', 'x')) FROM n`)
    db.close()
  })

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    it(`by ${signal} leaves nothing beside FILE, not even the hidden partial copy, and says so in one line`, async () => {
      const folder = mkdtempSync(join(dir, 'interrupted-'))
      const file = join(folder, 'copy.db')
      const child = spawn(process.execPath, [BIN, 'backup', file], { env: { ...process.env, DATABASE_URL: `sqlite:${source}` }, stdio: ['ignore', 'pipe', 'pipe'] })
      let stderr = ''
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
      // The partial copy appears beside FILE as soon as the copy starts.
      while (!readdirSync(folder).some((name) => name.endsWith('.partial'))) await sleep(10)
      child.kill(signal)
      assert.equal(await exited, 1, stderr)
      assert.equal(stderr, `petstore-orders: backup interrupted by ${signal}: nothing was written\n`)
      assert.deepEqual(readdirSync(folder), [])
    })
  }

  it('refuses an existing FILE before copying anything', async () => {
    const folder = mkdtempSync(join(dir, 'exists-'))
    const file = join(folder, 'copy.db')
    writeFileSync(file, 'mine')
    const result = await cli(['backup', file], { DATABASE_URL: `sqlite:${source}` })
    assertOneLineError(result, 1, /exists: a backup never replaces a file; name a new one$/)
    assert.deepEqual(readdirSync(folder), ['copy.db'])
    assert.equal(readFileSync(file, 'utf8'), 'mine')
  })
})
