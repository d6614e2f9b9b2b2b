import assert from 'node:assert/strict'
import { test } from 'node:test'
import { demoKeyPath } from '../src/domain/demo-key-file.js'

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
