import assert from 'node:assert/strict'
import { test } from 'node:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { demoKeyPath, writeDemoKey } from '../src/demo/demo-key-file.js'
import { DEMO_KEY_NAME, prepareDemo } from '../src/demo/prepare-demo.js'
import { hashApiKey, SCOPES } from '../src/domain/api-keys.js'
import { createKey } from '../src/keys/create-key.js'
import { openStore } from '../src/store/open-store.js'

test('the demo key file: beside a SQLite file; per PostgreSQL database under ./data, never naming the password', () => {
  assert.equal(demoKeyPath({ kind: 'sqlite', path: 'data/petstore.db' }, '/srv/app'), '/srv/app/data/petstore.db.demo-key')
  assert.equal(demoKeyPath({ kind: 'sqlite', path: '/var/lib/p.db' }, '/srv/app'), '/var/lib/p.db.demo-key')
  const pg = (url: string): string => demoKeyPath({ kind: 'postgres', url, poolSize: 10 }, '/srv/app')
  const one = pg('postgres://u:secret@db.internal:5432/orders')
  assert.match(one, /^\/srv\/app\/data\/postgres-[0-9a-f]{16}\.demo-key$/)
  assert.equal(pg('postgresql://other:pw@DB.internal/orders'), one) // same database: same key, whoever connects
  assert.notEqual(pg('postgres://u@db.internal/orders_test'), one)
  assert.notEqual(pg('postgres://u@db.internal:5433/orders'), one)
  assert.notEqual(pg('postgres://u@db2.internal/orders'), one)
  assert.doesNotMatch(one, /secret/)
})

test('the kept demo key is reused only while it has every scope: one from a build with fewer is replaced', async () => {
  const folder = mkdtempSync(join(tmpdir(), 'petstore-demo-key-'))
  const path = join(folder, 'petstore.db')
  const store = await openStore({ kind: 'sqlite', path })
  try {
    await store.migrate()
    const keyFile = `${path}.demo-key`
    const old = await createKey(store.apiKeys, { name: DEMO_KEY_NAME }) // the default scopes: no orders:write
    await writeDemoKey(keyFile, old.secret)
    const replaced = await prepareDemo(store, keyFile)
    assert.equal(replaced.created, true)
    assert.notEqual(replaced.secret, old.secret)
    assert.deepEqual((await store.apiKeys.findByHash(hashApiKey(replaced.secret)))!.scopes, [...SCOPES])
    const kept = await prepareDemo(store, keyFile)
    assert.deepEqual([kept.created, kept.secret], [false, replaced.secret])
  } finally {
    await store.close()
    rmSync(folder, { recursive: true, force: true })
  }
})
