import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { BIN } from './support/server-process.js'

const MIB = 1024 * 1024

describe('orders import and pets import: empty and oversized files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-import-'))
  after(() => rmSync(dir, { recursive: true, force: true }))
  let databases = 0

  function cli(args: string[]): { status: number | null; stdout: string; stderr: string; path: string } {
    const path = join(dir, `petstore-${databases++}.db`)
    writeFileSync(path, '') // an empty SQLite database: the import does not create it (and say so)
    const result = spawnSync(process.execPath, [BIN, ...args], {
      env: { ...process.env, DATABASE_URL: `sqlite:${path}` },
      encoding: 'utf8',
      timeout: 60_000,
    })
    return { status: result.status, stdout: result.stdout, stderr: result.stderr, path }
  }

  function file(name: string, content: string): string {
    const path = join(dir, name)
    writeFileSync(path, content)
    return path
  }

  function count(path: string, table: 'orders' | 'pets'): number {
    const db = new Database(path, { readonly: true })
    try {
      return (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n
    } finally {
      db.close()
    }
  }

  for (const what of ['orders', 'pets'] as const) {
    for (const [name, content] of [
      ['empty', ''],
      ['blank', '\n  \n\r\n\t\n'],
      ['empty-array', ' [ ]\n'],
    ] as const) {
      it(`${what} import of a file that holds no records (${name}): exit 0, and a warning on stderr`, () => {
        const path = file(`${what}-${name}.json`, content)
        const { status, stdout, stderr } = cli([what, 'import', path])
        assert.equal(status, 0, stderr)
        assert.equal(stdout, `imported 0 ${what} from ${path}\n`)
        assert.equal(stderr, `petstore-orders: warning: ${path} holds no ${what} (it is empty, blank, or an empty array)\n`)
      })
    }
  }

  it('a file with records gets no warning', () => {
    const path = file('one.ndjson', '{"id": 1}\n')
    const { status, stdout, stderr } = cli(['orders', 'import', path])
    assert.equal(status, 0, stderr)
    assert.equal(stdout, `imported 1 order from ${path}\n`)
    assert.equal(stderr, '')
  })

  it('an NDJSON line a little over 1 MiB: one line naming it, exit 1, nothing imported', () => {
    const long = `{"id": 2, "petId": 1${' '.repeat(MIB - 20)}}` // MIB + 1 bytes
    const path = file('long-line.ndjson', `{"id": 1}\n${long}\n{"id": 3}\n`)
    const { status, stdout, stderr, path: database } = cli(['orders', 'import', path])
    assert.equal(status, 1)
    assert.equal(stdout, '')
    assert.equal(stderr, `petstore-orders: ${path}: line 2: longer than 1 MiB, the most one record may take; nothing was imported\n`)
    assert.equal(count(database, 'orders'), 0)
  })

  it('an element of a JSON array a little over 1 MiB: one line naming it, exit 1, nothing imported', () => {
    const path = file('big-element.json', `[{"id": 1, "name": "Rex"},\n {"id": 2, "name": "${'x'.repeat(MIB + 1)}"}]\n`)
    const { status, stdout, stderr, path: database } = cli(['pets', 'import', path])
    assert.equal(status, 1)
    assert.equal(stdout, '')
    assert.equal(stderr, `petstore-orders: ${path}: record 2: larger than 1 MiB, the most one record may take; nothing was imported\n`)
    assert.equal(count(database, 'pets'), 0)
  })
})
