import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import { assertOk, cli } from './support/cli.js'
import { postgresForSuite } from './support/harness.js'
import { BIN, freePort } from './support/server-process.js'
import { TcpRelay } from './support/tcp-relay.js'

// A database unavailable at start (restarting, unreachable, another process's write lock) is
// waited for, said in the log, rather than exiting into a supervisor's restart limit; a stop signal
// ends the wait with 0. Any other error still stops a start at once (test/start-errors.test.ts).

const WAITING = /"msg":"the database is unavailable; trying again every 2 s until it answers \(SIGTERM stops\)"/
const ANSWERED = /"msg":"the database answers; starting"/

/** Waits for `condition`; the test's own timeout bounds it (the server says it waits after its first attempt). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await sleep(50)
}

/** `petstore-orders serve` on `databaseUrl`, its output kept, not waited for. */
async function serve(databaseUrl: string) {
  const origin = `http://127.0.0.1:${await freePort()}`
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: new URL(origin).port, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  const healthy = async (): Promise<boolean> => {
    try {
      return (await fetch(`${origin}/healthz`)).ok
    } catch {
      return false
    }
  }
  return { child, origin, exited, healthy, output: () => output }
}

/** A SQLite database, migrated, and a connection holding its write lock (as an import does) until released. */
async function lockedSqlite(dir: string): Promise<{ url: string; release(): void }> {
  const path = join(dir, 'petstore.db')
  assertOk(await cli(['migrate'], { DATABASE_URL: `sqlite:${path}` }))
  const holder = new Database(path)
  holder.pragma('journal_mode = WAL')
  holder.exec('BEGIN IMMEDIATE')
  return {
    url: `sqlite:${path}`,
    release: () => {
      holder.exec('ROLLBACK')
      holder.close()
    },
  }
}

describe('a start whose SQLite database another process holds', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-start-waits-'))
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('serve waits for the write lock, saying why, and starts once it is released', async () => {
    const lock = await lockedSqlite(mkdtempSync(join(dir, 'serve-')))
    const server = await serve(lock.url)
    try {
      await until(() => WAITING.test(server.output()))
      assert.match(server.output(), /SQLite is unavailable: another connection holds its write lock/)
      assert.equal(await server.healthy(), false, 'not listening while it waits')
      lock.release()
      await until(() => ANSWERED.test(server.output()))
      while (!(await server.healthy())) await sleep(50)
      assert.equal(server.output().match(new RegExp(WAITING.source, 'g'))!.length, 1, 'said once (again only after a minute)')
    } finally {
      server.child.kill('SIGTERM')
    }
    assert.deepEqual(await server.exited, { code: 0, signal: null })
  })

  it('migrate waits for it too, saying so on stderr, then finds the schema up to date', async () => {
    const lock = await lockedSqlite(mkdtempSync(join(dir, 'migrate-')))
    const child = spawn(process.execPath, [BIN, 'migrate'], { env: { ...process.env, DATABASE_URL: lock.url }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    let stdout = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
    await until(() => stderr.includes('petstore-orders: waiting for the database: SQLite is unavailable: another connection holds its write lock'))
    assert.equal(child.exitCode, null, 'still waiting')
    lock.release()
    assert.equal(await exited, 0, stderr)
    assert.equal(stdout, 'the database schema is up to date\n')
  })
})

describe('a start whose PostgreSQL server does not answer yet', () => {
  const postgres = postgresForSuite()

  it('serve waits for it, and a SIGTERM ends the wait with 0', async (t) => {
    if (postgres.skip !== undefined) return t.skip(postgres.skip)
    const server = await serve(new TcpRelay(await freePort(), new URL(postgres.database.url)).url) // nothing listens there
    await until(() => WAITING.test(server.output()))
    assert.match(server.output(), /PostgreSQL at 127\.0\.0\.1:\d+ is unavailable \(ECONNREFUSED\)/)
    server.child.kill('SIGTERM')
    assert.deepEqual(await server.exited, { code: 0, signal: null }, server.output())
    assert.doesNotMatch(server.output(), /"msg":"started"/)
  })

  it('serve starts once a server answers at the address', async (t) => {
    if (postgres.skip !== undefined) return t.skip(postgres.skip)
    const relay = new TcpRelay(await freePort(), new URL(postgres.database.url))
    const server = await serve(relay.url) // nothing listens there yet
    try {
      await until(() => WAITING.test(server.output()))
      await relay.up() // now a server answers there: a relay to the real one
      await until(() => ANSWERED.test(server.output()))
      while (!(await server.healthy())) await sleep(50)
      assert.equal((await fetch(`${server.origin}/readyz`)).status, 200)
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
      await relay.down()
    }
    assert.deepEqual(await server.exited, { code: 0, signal: null })
  })
})
