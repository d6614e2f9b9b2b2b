import assert from 'node:assert/strict'
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js'

// What is SQLite's own; every store-level behaviour is in store-contract.test.ts.
describe('SqliteStore', () => {
  const root = mkdtempSync(join(tmpdir(), 'petstore-sqlite-'))
  after(() => rmSync(root, { recursive: true, force: true }))

  const mode = (path: string): number => statSync(path).mode & 0o777

  it('creates its directory 0700 and the database and its WAL files 0600, whatever the umask', async () => {
    const previous = process.umask(0o022) // the usual umask, which would make them 0755 and 0644
    const path = join(root, 'fresh', 'data', 'petstore.db')
    let store: SqliteStore | undefined
    try {
      store = new SqliteStore(path)
      await store.migrate()
      await store.orders.cancel(1n, null) // opens the cancel writer too
      assert.equal(mode(join(root, 'fresh')), 0o700)
      assert.equal(mode(join(root, 'fresh', 'data')), 0o700)
      for (const file of [path, `${path}-wal`, `${path}-shm`]) assert.equal(mode(file), 0o600, file)
    } finally {
      process.umask(previous)
      await store?.close()
    }
  })

  it('leaves the mode of an existing directory and database file as the operator set it', async () => {
    const dir = join(root, 'existing')
    mkdirSync(dir, { mode: 0o750 })
    chmodSync(dir, 0o750)
    const path = join(dir, 'petstore.db')
    writeFileSync(path, '', { mode: 0o640 })
    chmodSync(path, 0o640)
    const store = new SqliteStore(path)
    try {
      await store.migrate()
      assert.equal(mode(dir), 0o750)
      assert.equal(mode(path), 0o640)
    } finally {
      await store.close()
    }
  })
})
