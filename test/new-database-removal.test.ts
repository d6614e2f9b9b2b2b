import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { openStore } from '../src/store/open-store.js'
import { removeUnusedDatabase } from '../src/store/sqlite/database.js'
import { order } from './support/harness.js'

// A command that created a new SQLite database and then failed removes it (nothing half-written),
// but never one that another command, started at the same time on the same new path, has come to use.
describe('removing a new SQLite database after a failed command', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-new-db-'))
  after(() => rmSync(dir, { recursive: true, force: true }))

  async function created(name: string): Promise<string> {
    const path = join(dir, name)
    const store = await openStore({ kind: 'sqlite', path })
    await store.migrate()
    await store.close()
    return path
  }

  it('removes one only its own (failed) work touched: the file, its WAL, shared memory and journal', async () => {
    const path = await created('mine.db')
    assert.equal(removeUnusedDatabase(path), true)
    assert.deepEqual(readdirSync(dir).filter((file) => file.startsWith('mine.db')), [])
  })

  it('keeps one another connection has open', async () => {
    const path = await created('open.db')
    const other = new Database(path)
    other.pragma('journal_mode = WAL')
    other.prepare('SELECT count(*) FROM orders').get()
    try {
      assert.equal(removeUnusedDatabase(path), false)
      assert.ok(existsSync(path))
    } finally {
      other.close()
    }
    assert.equal(removeUnusedDatabase(path), true, 'removed once the other is closed')
  })

  it('keeps one holding another command\'s work: an order it imported, a key it created', async () => {
    const withOrder = await created('orders.db')
    const store = await openStore({ kind: 'sqlite', path: withOrder })
    await store.orders.import((async function* () { yield order({ id: 1n }) })())
    await store.close()
    assert.equal(removeUnusedDatabase(withOrder), false)
    assert.ok(existsSync(withOrder))
    const withKey = await created('keys.db')
    const keys = await openStore({ kind: 'sqlite', path: withKey })
    await keys.apiKeys.create({ name: 'ci', hash: 'h'.repeat(64), displayPrefix: 'pso_abcdefgh', scopes: ['orders:read'], expiresAt: null })
    await keys.close()
    assert.equal(removeUnusedDatabase(withKey), false)
  })
})
