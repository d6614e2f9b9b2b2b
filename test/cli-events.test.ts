import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, forEachStore, type TestDatabaseHandle, within } from './support/harness.js'
import { assertOk, assertOneLineError, cli, type Result } from './support/cli.js'
import { BIN } from './support/server-process.js'

const MAX = 9223372036854775807n
const BEYOND_2_53 = 9007199254740993n // 2^53 + 1: a JS number cannot hold it



/** `events tail` running: its complete stdout lines so far, its stderr, and how it ended. */
interface Tail {
  child: ChildProcess
  lines(): string[]
  stderr(): string
  ended: Promise<Result>
}

function tail(databaseUrl: string, args: string[] = []): Tail {
  const child = spawn(process.execPath, [BIN, 'events', 'tail', ...args], {
    env: { ...process.env, PETSTORE_DEBUG: undefined, DATABASE_URL: databaseUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const ended = new Promise<Result>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })))
  return { child, lines: () => stdout.split('\n').slice(0, -1), stderr: () => stderr, ended }
}

/**
 * Waits until the tail has its database open: a TCP connection (to PostgreSQL) or the SQLite file
 * among its descriptors (its stdio are Unix sockets, so a socket alone tells nothing). Its signal
 * handlers are installed before that: a signal sent earlier may find Node still starting and end it
 * unhandled, which no fixed sleep rules out on a loaded machine.
 */
async function databaseOpened(running: Tail): Promise<void> {
  const fds = `/proc/${running.child.pid}/fd`
  const opened = (): boolean => {
    const tcp = new Set(
      ['/proc/net/tcp', '/proc/net/tcp6']
        .flatMap((table) => readFileSync(table, 'utf8').split('\n').slice(1))
        .filter((line) => line.trim() !== '') // the tables end with a newline
        .map((line) => line.trim().split(/\s+/)[9]),
    )
    return readdirSync(fds).some((fd) => {
      try {
        const target = readlinkSync(`${fds}/${fd}`)
        const socket = /^socket:\[(\d+)\]$/.exec(target)?.[1]
        return target.endsWith('.db') || (socket !== undefined && tcp.has(socket))
      } catch {
        return false // closed meanwhile
      }
    })
  }
  await within(10_000, 'the tail to open its database', opened, 20)
}

/** Stops a tail with `signal`; it exits 0, having printed whole lines and the resume line; returns its cursor. */
async function stop(running: Tail, signal: 'SIGINT' | 'SIGTERM'): Promise<{ lines: string[]; cursor: string }> {
  running.child.kill(signal)
  const { code, stdout, stderr } = await running.ended
  assert.equal(code, 0, `exit status ${code} after ${signal}; stderr: ${stderr}`)
  assert.ok(stdout === '' || stdout.endsWith('\n'), 'stdout ends with a whole line')
  const match = /^resume with: petstore-orders events tail --after ([0-9]+)\n$/.exec(stderr)
  assert.ok(match !== null, `stderr: ${JSON.stringify(stderr)}`)
  return { lines: stdout.split('\n').slice(0, -1), cursor: match[1]! }
}

interface Line {
  id: string
  type: string
  occurredAt: string
  order: { id: string; status: string; petId?: string; cancellationReason?: string }
}

/** An NDJSON line, its int64 fields kept exact as decimal strings. */
function parseLine(line: string): Line {
  return JSON.parse(line.replace(/"(id|petId)":(-?[0-9]+)/g, '"$1":"$2"')) as Line
}

const scratch = mkdtempSync(join(tmpdir(), 'petstore-cli-events-'))
after(() => rmSync(scratch, { recursive: true, force: true }))
let files = 0

function ndjsonFile(records: unknown[]): string {
  const path = join(scratch, `orders-${++files}.ndjson`)
  writeFileSync(path, records.map((record) => JSON.stringify(record, (_, v: unknown) => (typeof v === 'bigint' ? `${v}` : v))).join('\n') + '\n')
  return path
}


forEachStore('petstore-orders events tail', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let env: Record<string, string>

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    env = { DATABASE_URL: database.url }
  })
  after(async () => {
    await store?.close()
    await database?.dispose()
  })

  it('prints every event as NDJSON, then each new one; on SIGINT the cursor that resumes with exactly the later events', async () => {
    assertOk(await cli(['orders', 'import', ndjsonFile([
      { id: MAX, petId: BEYOND_2_53, quantity: 2, status: 'pending' },
      { id: 2, status: 'pending' },
      { id: BEYOND_2_53, status: 'shipped', complete: true },
    ])], env))

    const first = tail(database.url)
    await within(10_000, 'the three events already there', () => first.lines().length === 3, 20)
    // Then changes while it waits: each comes out after its commit (normally within about a second;
    // the bound here is only for a loaded machine: a tail that misses a commit never prints it).
    assertOk(await cli(['orders', 'ship', String(MAX)], env))
    await within(15_000, 'the shipped order', () => first.lines().length === 4, 20)
    await store.orders.cancel(2n, null, 'duplicate') // this test's own process: another writer of the file
    await within(15_000, 'the cancelled order, after its commit', () => first.lines().length === 5, 10)
    const stopped = await stop(first, 'SIGINT')

    const events = stopped.lines.map(parseLine)
    assert.deepEqual(events.map((event) => [event.type, event.order.id, event.order.status]), [
      ['order.created', String(MAX), 'pending'],
      ['order.created', '2', 'pending'],
      ['order.created', String(BEYOND_2_53), 'shipped'],
      ['order.shipped', String(MAX), 'shipped'],
      ['order.cancelled', '2', 'cancelled'],
    ])
    assert.equal(events[0]!.order.petId, String(BEYOND_2_53), 'exact past 2^53')
    assert.equal(events[4]!.order.cancellationReason, 'duplicate')
    assert.ok(stopped.lines[0]!.includes(`"id":${MAX}`), stopped.lines[0])
    for (let i = 1; i < events.length; i++) assert.ok(BigInt(events[i]!.id) > BigInt(events[i - 1]!.id))
    assert.equal(stopped.cursor, events[4]!.id, 'the resume cursor is the last event printed')

    // Later changes, then a tail from the printed cursor: exactly those, nothing earlier.
    assertOk(await cli(['orders', 'import', ndjsonFile([{ id: 10, status: 'pending' }, { id: 11, status: 'pending' }])], env))
    assertOk(await cli(['orders', 'ship', '10'], env))
    const resumed = tail(database.url, ['--after', stopped.cursor])
    await within(10_000, 'the three later events', () => resumed.lines().length === 3, 20)
    await sleep(300)
    const second = await stop(resumed, 'SIGTERM')
    assert.deepEqual(second.lines.map(parseLine).map((event) => [event.type, event.order.id]), [
      ['order.created', '10'],
      ['order.created', '11'],
      ['order.shipped', '10'],
    ])
    assert.equal(second.cursor, parseLine(second.lines[2]!).id)

    // Both runs together are the whole feed, byte for byte what the store's page holds.
    const page = await store.events.read(undefined, 1000)
    assert.equal(`[${[...stopped.lines, ...second.lines].join(',')}]`, page.json.toString('utf8'))

    // Stopped while waiting with nothing new: it resumes from where it was.
    const idle = tail(database.url, ['--after', second.cursor])
    await databaseOpened(idle)
    await sleep(300) // and, most likely, waiting for new events: the stop must find it either way
    const idleStop = await stop(idle, 'SIGINT')
    assert.deepEqual(idleStop, { lines: [], cursor: second.cursor })
  })

  it('a bad --after: one line naming the problem, non-zero exit, nothing on stdout', async () => {
    assertOneLineError(await cli(['events', 'tail', '--after', 'abc'], env), 2, /--after must be a cursor of the event feed, a decimal integer from 0 to 9223372036854775807/)
    assertOneLineError(await cli(['events', 'tail', '--after', '9223372036854775808'], env), 2, /--after must be a cursor/)
    assertOneLineError(await cli(['events', 'tail', '--after=-1'], env), 2, /--after must be a cursor/)
    assertOneLineError(await cli(['events', 'tail', '--after'], env), 2, /option --after needs a value/)
    assertOneLineError(await cli(['events', 'tail', 'now'], env), 2, /unexpected argument "now"/)
    assertOneLineError(await cli(['events', 'tail', '--after', String(MAX)], env), 1, /--after 9223372036854775807 is past the end of the event feed/)

    // Retention deletes the oldest events: a cursor before them is refused, naming why.
    const oldest = (await store.events.read(undefined, 1)).next
    await sleep(20)
    const cut = new Date()
    await sleep(20)
    while ((await store.events.prune(cut)) > 0);
    assertOk(await cli(['orders', 'import', ndjsonFile([{ id: 20, status: 'pending' }])], env))
    assertOneLineError(await cli(['events', 'tail', '--after', String(oldest)], env), 1, new RegExp(`--after ${oldest} is too old: the events after it have been deleted by retention`))
  })
})

describe('petstore-orders events: help', () => {
  const env = { DATABASE_URL: `sqlite:${join(scratch, 'never', 'never.db')}` }

  it('events tail --help; the group and the command list name it', async () => {
    const help = await cli(['events', 'tail', '--help'], env)
    assertOk(help)
    assert.match(help.stdout, /^Usage: petstore-orders events tail \[--after CURSOR\]/)
    assert.match(help.stdout, /resume with: petstore-orders events tail --after/)
    assert.match(help.stdout, /Examples:\n {2}petstore-orders events tail\n/)
    assert.match((await cli(['events', '--help'], env)).stdout, /^Usage: petstore-orders events SUBCOMMAND/)
    assert.match((await cli(['--help'], env)).stdout, /\n {2}events tail \[--after CURSOR\] +print order events as NDJSON/)
  })
})
