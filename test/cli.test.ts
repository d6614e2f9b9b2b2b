import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeFile } from 'node:fs/promises'
import { after, describe, test } from 'node:test'
import { Progress } from '../src/cli/progress.js'
import { hashApiKey } from '../src/domain/api-keys.js'
import { demoKeyPath } from '../src/demo/demo-key-file.js'
import { openStore, SqliteFileMissingError } from '../src/store/open-store.js'
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js'
import type { Store } from '../src/store/store.js'
import type { Order } from '../src/schemas/order.js'
import { bearer, createDatabase, forEachStore, listedOrders, type StoreKind, type TestDatabaseHandle } from './support/harness.js'
import { assertOk, assertOneLineError, cli, cliFromPipe, cliToFile } from './support/cli.js'
import { startDemo } from './support/demo.js'
import { BIN, freePort, spawnServer } from './support/server-process.js'

const MAX = 9223372036854775807n
const BEYOND_2_53 = 9007199254740993n // 2^53 + 1: a JS number cannot hold it





const scratch = mkdtempSync(join(tmpdir(), 'petstore-cli-'))
after(() => rmSync(scratch, { recursive: true, force: true }))
let fileCount = 0

/** A file in the scratch directory holding `text`. */
function file(text: string, extension = 'json'): string {
  const path = join(scratch, `input-${++fileCount}.${extension}`)
  writeFileSync(path, text)
  return path
}

function ndjson(records: unknown[]): string {
  return records.map((record) => JSON.stringify(record)).join('\n') + '\n'
}

/** Every listed order, read through the store (ids and petIds as bigint: exact). */
async function listOrders(database: TestDatabaseHandle): Promise<Order[]> {
  return withStore(database, listedOrders)
}

/** The types of an order's events in the feed, in order, space-separated. */
async function eventTypes(store: Store, orderId: bigint): Promise<string> {
  const page = await store.events.read(undefined, 1000)
  const types = [...page.json.toString().matchAll(/"type":"([a-z.]+)","occurredAt":"[^"]+","order":\{"id":(\d+),/g)]
  return types.filter((match) => BigInt(match[2]!) === orderId).map((match) => match[1]).join(' ')
}

async function withStore<T>(database: TestDatabaseHandle, work: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(database.config)
  try {
    return await work(store)
  } finally {
    await store.close()
  }
}

const hasScript = spawnSync('script', ['--version']).status === 0

const COMMANDS = ['serve', 'migrate', 'backup', 'healthcheck', 'keys create', 'keys list', 'keys revoke', 'orders import', 'orders ship', 'orders complete', 'pets import', 'seed', 'events tail']

describe('petstore-orders: help and usage (no database touched)', () => {
  // A database that must never come to exist: usage errors do not open it.
  const untouched = join(scratch, 'untouched', 'never.db')
  const env = { DATABASE_URL: `sqlite:${untouched}` }
  after(() => assert.equal(existsSync(untouched), false, 'a usage error created the database'))

  test('--help lists every command, with examples, on stdout', async () => {
    for (const args of [['--help'], ['-h'], ['help']]) {
      const result = await cli(args, env)
      assertOk(result)
      assert.equal(result.stderr, '')
      assert.match(result.stdout, /^Usage: petstore-orders COMMAND/)
      for (const command of COMMANDS) assert.ok(result.stdout.includes(`  ${command}`), `${command} missing from --help`)
      assert.match(result.stdout, /Examples:\n {2}petstore-orders /)
      assert.match(result.stdout, /DATABASE_URL/)
    }
  })

  test('every command has --help with usage and at least one example', async () => {
    await Promise.all(COMMANDS.map(async (command) => {
      const words = command.split(' ')
      const result = await cli([...words, '--help'], env)
      assertOk(result)
      assert.equal(result.stderr, '')
      assert.ok(result.stdout.startsWith(`Usage: petstore-orders ${command}`), `${command} --help: ${result.stdout.slice(0, 80)}`)
      const examples = result.stdout.split('Examples:\n')[1] ?? ''
      assert.ok(examples.includes(`petstore-orders ${command}`), `${command} --help has no example`)
      assert.match(result.stdout, /Exit status: 0 done; 1 failed/)
      // The same text from `help COMMAND`, and with -h after other arguments.
      assert.equal((await cli(['help', ...words], env)).stdout, result.stdout)
      assert.equal((await cli([...words, '--bogus', '-h'], env)).stdout, result.stdout)
    }))
    for (const group of ['keys', 'orders', 'pets', 'events']) {
      const result = await cli([group, '--help'], env)
      assertOk(result)
      assert.match(result.stdout, new RegExp(`^Usage: petstore-orders ${group} SUBCOMMAND`))
    }
  })

  test('documented decisions: ship of a shipped order succeeds; keys list is TSV when piped', async () => {
    assert.match((await cli(['orders', 'ship', '--help'], env)).stdout, /already shipped is left as it is and the command succeeds \(exit 0\)/)
    assert.match((await cli(['orders', 'complete', '--help'], env)).stdout, /already complete is left as it is and the command succeeds \(exit 0\)/)
    assert.match((await cli(['keys', 'list', '--help'], env)).stdout, /separated by tabs/)
  })

  test('no command: the help on stderr, exit 2; a group without its command likewise', async () => {
    const bare = await cli([], env)
    assert.equal(bare.code, 2)
    assert.equal(bare.stdout, '')
    assert.match(bare.stderr, /^Usage: petstore-orders COMMAND/)
    const group = await cli(['keys'], env)
    assert.equal(group.code, 2)
    assert.match(group.stderr, /^Usage: petstore-orders keys SUBCOMMAND/)
  })

  test('--version', async () => {
    const result = await cli(['--version'], env)
    assertOk(result)
    assert.match(result.stdout, /^\d+\.\d+\.\d+\n$/)
  })

  test('usage errors: one line naming the problem, exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['frobnicate'], /^petstore-orders: unknown command "frobnicate" \(commands: serve, migrate, backup, healthcheck, keys, orders, pets, seed, events, webhooks\)/],
      [['--frobnicate'], /unknown option --frobnicate/],
      [['keys', 'rotate'], /unknown keys command "rotate" \(keys commands: create, list, revoke\)/],
      [['keys', 'create', '--name', 'x', '--bogus'], /unknown option --bogus; see 'petstore-orders keys create --help'/],
      [['keys', 'list', '--csv'], /unknown option --csv/],
      [['orders', 'import', '--force', 'x.json'], /unknown option --force/],
      [['seed', '--orders', '5', '-x'], /unknown option -x/],
      [['serve', '--port', '1'], /unknown option --port/],
      [['migrate', 'now'], /unexpected argument "now"/],
      [['keys', 'create'], /missing --name/],
      [['keys', 'create', '--name'], /option --name needs a value/],
      [['keys', 'create', '--name', ''], /--name must be 1 to 100 characters/],
      [['keys', 'create', '--name', 'x'.repeat(101)], /--name must be 1 to 100 characters/],
      [['keys', 'create', '--name', 'a\tb'], /without control characters/],
      [['keys', 'create', '--name', 'x', '--scopes', 'orders:delete'], /unknown scope "orders:delete"/],
      [['keys', 'create', '--name', 'x', '--scopes', ','], /--scopes must name at least one scope/],
      [['keys', 'create', '--name', 'x', '--expires-in', '1y'], /invalid --expires-in "1y"/],
      [['keys', 'create', '--name', 'x', '--name', 'y'], /option --name is given more than once/],
      [['orders', 'update', '1', '--quantity', '3', '--quantity=4'], /option --quantity is given more than once/],
      [['keys', 'create', '--name', 'x', '--expires-in', '2900000d'], /invalid --expires-in "2900000d" \(use a whole number from 1 to 999999 and a unit/],
      [['keys', 'create', '--name', 'x', '--expires-in', '999999w'], /invalid --expires-in "999999w": it would end after the year 9999;/],
      [['keys', 'list', '--json=yes'], /option --json does not take a value/],
      [['keys', 'revoke'], /missing ID/],
      [['keys', 'revoke', '1', '2'], /unexpected argument "2"/],
      [['orders', 'import'], /missing FILE/],
      [['orders', 'ship'], /missing ID/],
      [['orders', 'ship', 'ten'], /ID must be an order id, an integer from 1 to 9223372036854775807, got "ten"/],
      [['orders', 'ship', '9223372036854775808'], /ID must be an order id/],
      [['orders', 'ship', '0'], /ID must be an order id/],
      [['orders', 'complete'], /missing ID/],
      [['orders', 'complete', '1', '2'], /unexpected argument "2"/],
      [['orders', 'complete', '-5'], /ID must be an order id|the value of ID starts with "-"|unknown option -5/],
      [['orders', 'complete', '1e3'], /ID must be an order id, an integer from 1 to 9223372036854775807, got "1e3"; see 'petstore-orders orders complete --help'/],
      [['pets', 'import'], /missing FILE/],
      [['seed'], /missing --orders/],
      [['seed', '--orders', '0'], /--orders must be an integer from 1 to 10000000, got "0"/],
      [['seed', '--orders', '1.5'], /--orders must be an integer/],
      [['seed', '--orders', '10', '--seed', '-1'], /the value of --seed starts with "-"/],
      [['seed', '--orders', '10', '--seed', '4294967296'], /--seed must be an integer from 0 to 4294967295/],
      [['seed', '--orders', '10', '--first-id', '9223372036854775800'], /--first-id must be an integer from 1 to 9223372036854775798/],
    ]
    const results = await Promise.all(cases.map(([args]) => cli(args, env)))
    for (const [i, [args, pattern]] of cases.entries()) {
      assert.doesNotThrow(() => assertOneLineError(results[i]!, 2, pattern), `petstore-orders ${args.join(' ')}`)
    }
  })

  test('a bad DATABASE_URL: one line naming it, exit 1', async () => {
    for (const args of [['migrate'], ['keys', 'list'], ['orders', 'import', file('[]')], ['serve']]) {
      const result = await cli(args, { DATABASE_URL: 'mysql://db/petstore' })
      assertOneLineError(result, 1, /^petstore-orders: DATABASE_URL: must be a postgres:\/\/, postgresql:\/\/ or sqlite: URL/)
    }
    assertOneLineError(await cli(['migrate'], { DATABASE_URL: 'sqlite:' }), 1, /DATABASE_URL: sqlite: needs a file path/)
    // serve validates all of its configuration.
    assertOneLineError(await cli(['serve'], { ...env, PORT: 'eighty' }), 1, /^petstore-orders: PORT: must be an integer/)
  })

  test('an unreadable FILE: one line, exit 1, the database not even opened', async () => {
    assertOneLineError(await cli(['orders', 'import', join(scratch, 'missing.json')], env), 1, /cannot read .*missing\.json: no such file$/)
    assertOneLineError(await cli(['pets', 'import', scratch], env), 1, /cannot read .*: it is a directory$/)
  })
})

describe('progress line', () => {
  test('rewritten in place on a terminal, throttled, cleared; nothing when not a terminal', () => {
    let clock = 0
    const written: string[] = []
    const tty = new Progress({ isTTY: true, columns: 40, write: (text: string) => written.push(text) }, { intervalMs: 100, now: () => clock })
    tty.update('one')
    clock = 50
    tty.update('two') // too soon
    tty.update('three', true)
    clock = 200
    tty.update('x'.repeat(100))
    tty.clear()
    assert.deepEqual(written, ['\r\x1b[2Kone', '\r\x1b[2Kthree', `\r\x1b[2K${'x'.repeat(38)}…`, '\r\x1b[2K'])

    const piped: string[] = []
    const quiet = new Progress({ isTTY: false, write: (text: string) => piped.push(text) })
    quiet.update('one', true)
    quiet.clear()
    assert.deepEqual(piped, [])
  })

  test('import and seed show it on a terminal (a pseudo-terminal from script(1))', { skip: hasScript ? false : 'script(1) is not installed' }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-cli-tty-'))
    try {
      const run = (args: string): string =>
        spawnSync('script', ['-qfec', `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} ${args}`, '/dev/null'], {
          env: { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'x.db')}` },
          encoding: 'utf8',
        }).stdout
      const clear = '\r\x1b[2K' // carriage return, erase the line
      const seeded = run('seed --orders 30000')
      assert.ok(seeded.includes(`${clear}seeding`), JSON.stringify(seeded))
      assert.ok(seeded.includes(`${clear}seeded 30000 orders`), JSON.stringify(seeded)) // cleared before the result
      const input = join(dir, 'orders.ndjson')
      writeFileSync(input, ndjson(Array.from({ length: 20_000 }, (_, i) => ({ id: 100_000 + i }))))
      const imported = run(`orders import ${JSON.stringify(input)}`)
      assert.ok(imported.includes(`${clear}importing orders from ${input}`), JSON.stringify(imported))
      assert.ok(imported.includes(`${clear}imported 20000 orders`), JSON.stringify(imported))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('a command that creates the SQLite database says so', () => {
  test('on stderr, with the full path, once: run from another folder, DATABASE_URL unset', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'petstore-cli-cwd-'))
    try {
      const created = join(cwd, 'data', 'petstore.db')
      const first = await cli(['migrate'], { DATABASE_URL: undefined }, cwd)
      assertOk(first)
      assert.equal(first.stderr, `petstore-orders: created a new SQLite database at ${created} (DATABASE_URL is unset)\n`)
      const second = await cli(['keys', 'list'], { DATABASE_URL: undefined }, cwd)
      assertOk(second)
      assert.equal(second.stderr, '')
      assert.equal(second.stdout, '')
      const named = join(cwd, 'other.db')
      const third = await cli(['orders', 'import', file('[{"id": 1}]')], { DATABASE_URL: 'sqlite:other.db' }, cwd)
      assertOk(third)
      assert.equal(third.stderr, `petstore-orders: created a new SQLite database at ${named} (named by DATABASE_URL)\n`)
    } finally {
      rmSync(cwd, { recursive: true, force: true })
    }
  })

  test('and one that then fails leaves no database behind: one error line, and the path is refused again', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'petstore-cli-cwd-'))
    try {
      const path = join(cwd, 'typo.db')
      const env = { DATABASE_URL: 'sqlite:typo.db' }
      for (const bad of ['{"id": 1, "quantity": 0}\n', '[{"id": 1},']) {
        const failed = await cli(['orders', 'import', file(bad, bad.startsWith('[') ? 'json' : 'ndjson')], env, cwd)
        assertOneLineError(failed, 1, /nothing was imported$/)
        assert.deepEqual(readdirSync(cwd), [], 'no database file, WAL or shared memory left')
      }
      const refused = await cli(['keys', 'list'], env, cwd)
      assertOneLineError(refused, 1, /no SQLite database at /)
      assert.ok(refused.stderr.includes(`no SQLite database at ${path} `), refused.stderr)
    } finally {
      rmSync(cwd, { recursive: true, force: true })
    }
  })
})

describe('a command that does not create a database, given a SQLite file that does not exist', () => {
  // Every command but serve, migrate, seed and the imports: they read or change what a database holds.
  const commands = [
    ['keys', 'list'],
    ['keys', 'create', '--name', 'ops'],
    ['keys', 'revoke', '1'],
    ['orders', 'ship', '1'],
    ['orders', 'complete', '1'],
    ['events', 'tail'],
    ['webhooks', 'list'],
    ['webhooks', 'add', 'https://example.com/hooks'],
    ['webhooks', 'remove', '1'],
    ['webhooks', 'replay', '1', '--after', '1'],
    ['webhooks', 'ping', '1'],
    ['webhooks', 'attempts', '1'],
    ['webhooks', 'rotate', '1'],
    ['webhooks', 'enable', '1'],
    ['webhooks', 'disable', '1'],
  ]

  test('fails with one line naming the path, exit 1, creating neither the file nor its directory', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'petstore-cli-missing-'))
    try {
      const named = join(cwd, 'no', 'such', 'folder', 'petstore.db')
      const unset = join(cwd, 'data', 'petstore.db') // the default, under the current directory
      for (const args of commands) {
        const viaUrl = await cli(args, { DATABASE_URL: `sqlite:${named}` }, cwd)
        assertOneLineError(viaUrl, 1, new RegExp(`^petstore-orders: no SQLite database at ${escape(named)} \\(named by DATABASE_URL\\); only serve, migrate, seed and the imports create one$`))
        const byDefault = await cli(args, { DATABASE_URL: undefined }, cwd)
        assertOneLineError(byDefault, 1, new RegExp(`^petstore-orders: no SQLite database at ${escape(unset)} \\(DATABASE_URL is unset\\); only`))
        assert.deepEqual(readdirSync(cwd), [], `${args.join(' ')} created something`)
      }
    } finally {
      rmSync(cwd, { recursive: true, force: true })
    }
  })

  test('a file removed after the check is not made anew: the store, opened to find its file, makes nothing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-cli-missing-'))
    try {
      const path = join(dir, 'gone', 'petstore.db')
      assert.throws(() => new SqliteStore(path, { mustExist: true }), (error) => error instanceof SqliteFileMissingError && error.path === path && error.message === `no SQLite database at ${path}`)
      assert.deepEqual(readdirSync(dir), [])
      mkdirSync(join(dir, 'gone'))
      assert.throws(() => new SqliteStore(path, { mustExist: true }), SqliteFileMissingError)
      assert.deepEqual(readdirSync(join(dir, 'gone')), [])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('on a terminal (a pseudo-terminal from script(1))', { skip: hasScript ? false : 'script(1) is not installed' }, () => {
  test('keys list aligns its columns under a header', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-cli-tty-'))
    try {
      const env = { DATABASE_URL: `sqlite:${join(dir, 'x.db')}` }
      assertOk(await cli(['migrate'], env))
      assertOk(await cli(['keys', 'create', '--name', 'billing'], env))
      const shown = inTerminal('keys list', env)
      assert.match(shown, /^ID +NAME +PREFIX +SCOPES +CREATED +EXPIRES +REVOKED\r?\n1 +billing +pso_\w{8} +orders:read,orders:cancel,pets:read +\S+ +- +-\r?\n$/m)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('serve prints its URL and /docs in one line on stderr; the log stays JSON on stdout', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-cli-tty-'))
    const port = await freePort()
    // stderr alone on the terminal (stdout to a file), as in `serve > log.ndjson`.
    const log = join(dir, 'log.ndjson')
    // script(1) runs the command in a session of its own: the shell writes the pid to stop.
    const pidFile = join(dir, 'pid')
    const command = `echo $$ > ${JSON.stringify(pidFile)}; exec timeout 60 ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} serve > ${JSON.stringify(log)}`
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'x.db')}`, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const stop = (signal: NodeJS.Signals): void => {
      if (existsSync(pidFile)) process.kill(Number(readFileSync(pidFile, 'utf8')), signal) // timeout(1) passes it on
    }
    try {
      let shown = ''
      const line = `petstore-orders: listening on http://127.0.0.1:${port}/v1; API reference: http://127.0.0.1:${port}/docs`
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no URL line in 30 s: ${JSON.stringify(shown)}`)), 30_000)
        child.stdout.on('data', (chunk: Buffer) => {
          shown += chunk.toString()
          if (shown.includes(line)) {
            clearTimeout(timer)
            resolve()
          }
        })
      })
      assert.match(shown, /created a new SQLite database at/)
      const exited = new Promise((resolve) => child.on('exit', resolve))
      stop('SIGTERM')
      await exited
      assert.doesNotMatch(shown, /"level"/) // the JSON log went to stdout, not to the terminal
      const first = readFileSync(log, 'utf8').split('\n')[0]!
      assert.equal(typeof JSON.parse(first), 'object', first)
    } finally {
      if (child.exitCode === null && child.signalCode === null) stop('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('serve, piped: no URL line on stderr', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-cli-pipe-'))
    try {
      const server = await spawnServer(`sqlite:${join(dir, 'x.db')}`)
      server.child.kill('SIGTERM')
      await server.exited
      assert.doesNotMatch(server.output(), /listening on http/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

/** What `petstore-orders ARGS` shows on a terminal (stdout and stderr both). */
function inTerminal(args: string, env: Record<string, string>): string {
  return spawnSync('script', ['-qfec', `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} ${args}`, '/dev/null'], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  }).stdout
}

forEachStore('petstore-orders CLI', (kind: StoreKind) => {
  // Each test has a database of its own: they run side by side.
  describe('commands', { concurrency: 4 }, () => commandTests(kind))
})

function commandTests(kind: StoreKind): void {
  /** A fresh database for one test; `env` points the CLI at it. */
  async function fresh(): Promise<{ database: TestDatabaseHandle; env: Record<string, string> }> {
    const database = await createDatabase(kind)
    // An empty file is an empty SQLite database: the commands under test do not create it (and say so).
    if (database.config.kind === 'sqlite') writeFileSync(database.config.path, '')
    cleanups.push(() => database.dispose())
    return { database, env: { DATABASE_URL: database.url } }
  }
  const cleanups: (() => Promise<void>)[] = []
  after(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup()
  })

  test('migrate: applies, then says the schema is up to date', async () => {
    const { env } = await fresh()
    const first = await cli(['migrate'], env)
    assertOk(first)
    assert.match(first.stdout, /^(applied migration \d+\n)+$/)
    const second = await cli(['migrate'], env)
    assertOk(second)
    assert.equal(second.stdout, 'the database schema is up to date\n')
  })

  test('keys create whose key cannot be written (a full disk) makes no key: one line, exit 1', async () => {
    const { database, env } = await fresh()
    assertOk(await cli(['migrate'], env))
    const result = await cliToFile(['keys', 'create', '--name', 'lost'], env, '/dev/full')
    assert.equal(result.code, 1)
    assert.match(result.stderr, /^petstore-orders: cannot write to standard output: ENOSPC[^\n]*\n$/)
    assert.equal(await withStore(database, async (store) => (await store.apiKeys.list()).length), 0)
    // And any other output to a full disk: the same line, not a trace.
    const listed = await cliToFile(['--version'], env, '/dev/full')
    assert.equal(listed.code, 1)
    assert.match(listed.stderr, /^petstore-orders: cannot write to standard output: ENOSPC[^\n]*\n$/)
  })

  test('keys create prints the key alone; keys list never shows it; revoke by id and by prefix', async () => {
    const { database, env } = await fresh()
    const created = await cli(['keys', 'create', '--name', 'billing service'], env)
    assertOk(created)
    assert.match(created.stdout, /^pso_[0-9A-Za-z]{32,}\n$/)
    const secret = created.stdout.trim()
    assert.match(created.stderr, /^created key 1 "billing service" \(pso_[0-9A-Za-z]{8}\)/)
    assert.ok(!created.stderr.includes(secret))

    const limited = await cli(['keys', 'create', '--name', 'dashboard', '--scopes', 'orders:read', '--expires-in', '30d'], env)
    assertOk(limited)
    const limitedSecret = limited.stdout.trim()
    await cli(['keys', 'create', '--name', 'third'], env)

    // The stored hash is of exactly the printed key.
    await withStore(database, async (store) => {
      const key = await store.apiKeys.findByHash(hashApiKey(secret))
      assert.equal(key?.name, 'billing service')
    })

    const list = await cli(['keys', 'list'], env)
    assertOk(list)
    const rows = list.stdout.trimEnd().split('\n').map((line) => line.split('\t'))
    assert.equal(rows.length, 3)
    for (const row of rows) assert.equal(row.length, 7, row.join(' | '))
    const [first, second] = rows as [string[], string[]]
    assert.deepEqual(first.slice(0, 2), ['1', 'billing service'])
    assert.equal(first[2], secret.slice(0, 12))
    assert.equal(first[3], 'orders:read,orders:cancel,pets:read')
    assert.match(first[4]!, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    assert.deepEqual(first.slice(5), ['-', '-'])
    assert.equal(second[3], 'orders:read')
    const expires = Date.parse(second[5]!) - Date.parse(second[4]!)
    assert.ok(Math.abs(expires - 30 * 86_400_000) < 60_000, `expires ${second[5]} for created ${second[4]}`)
    for (const text of [list.stdout, list.stderr]) {
      assert.ok(!text.includes(secret) && !text.includes(limitedSecret), 'keys list shows a secret')
      assert.ok(!text.includes(hashApiKey(secret)), 'keys list shows a hash')
    }

    const json = await cli(['keys', 'list', '--json'], env)
    assertOk(json)
    assert.ok(json.stdout.startsWith('[{"id":1,"name":"billing service",'), json.stdout.slice(0, 60))
    const parsed = JSON.parse(json.stdout) as Record<string, unknown>[]
    assert.deepEqual(Object.keys(parsed[0]!), ['id', 'name', 'displayPrefix', 'scopes', 'createdAt', 'expiresAt', 'revokedAt'])
    assert.deepEqual(parsed.map((key) => key.id), [1, 2, 3])
    assert.equal(parsed[0]!.expiresAt, null)
    assert.equal(parsed[1]!.expiresAt, second[5])
    assert.ok(!json.stdout.includes(secret.slice(12)))

    // By id, then by the display prefix of another.
    const byId = await cli(['keys', 'revoke', '1'], env)
    assertOk(byId)
    assert.equal(byId.stdout, `revoked key 1 "billing service" (${secret.slice(0, 12)})\n`)
    const byPrefix = await cli(['keys', 'revoke', limitedSecret.slice(0, 12)], env)
    assertOk(byPrefix)
    assert.equal(byPrefix.stdout, `revoked key 2 "dashboard" (${limitedSecret.slice(0, 12)})\n`)
    const again = await cli(['keys', 'revoke', '1'], env)
    assertOk(again)
    assert.match(again.stdout, /^key 1 "billing service" \(pso_\w{8}\) was already revoked at \d{4}-/)

    const revoked = (await cli(['keys', 'list'], env)).stdout.trimEnd().split('\n').map((line) => line.split('\t'))
    assert.match(revoked[0]![6]!, /^\d{4}-\d{2}-\d{2}T/)
    assert.match(revoked[1]![6]!, /^\d{4}-\d{2}-\d{2}T/)
    assert.equal(revoked[2]![6], '-')
    assert.equal(revoked[0]![6], again.stdout.match(/revoked at (\S+)$/m)![1]) // the first time is kept

    const takes = "keys revoke takes a key's id or its display prefix \\(pso_ and 8 characters\\), as 'keys list' shows them"
    assertOneLineError(await cli(['keys', 'revoke', '99'], env), 1, new RegExp(`^petstore-orders: no API key has the id "99"; ${takes}$`))
    assertOneLineError(await cli(['keys', 'revoke', 'pso_AAAAAAAA'], env), 1, new RegExp(`^petstore-orders: no API key has the display prefix "pso_AAAAAAAA"; ${takes}$`))
    // The whole key is not a prefix, and is not repeated.
    // Nor is it when pasted with more around it, or cut short past its display prefix.
    for (const given of [secret, `${secret} `, ` ${secret}`, `Bearer ${secret}`, `Authorization: Bearer ${secret}`, `${secret}\r`, secret.slice(0, 20)]) {
      const whole = await cli(['keys', 'revoke', given], env)
      assertOneLineError(whole, 1, /^petstore-orders: that holds a whole API key \(or more of one than its display prefix\), not its display prefix: keys revoke takes .* \(a key's first 12 characters\)/)
      assert.ok(!whole.stderr.includes(secret.slice(12, 20)), whole.stderr)
    }
    // A name: the ids of the keys that have it (names are not unique); nothing revoked.
    assertOneLineError(
      await cli(['keys', 'revoke', 'dashboard'], env),
      1,
      new RegExp(`^petstore-orders: no API key has the display prefix "dashboard"; ${takes}; the key named "dashboard" has the id 2$`),
    )
    assertOk(await cli(['keys', 'create', '--name', 'third'], env))
    assertOneLineError(await cli(['keys', 'revoke', 'third'], env), 1, /; the keys named "third" have the ids 3, 4$/)
    const after = (await cli(['keys', 'list'], env)).stdout.trimEnd().split('\n').map((line) => line.split('\t'))
    assert.deepEqual(after.slice(2).map((row) => [row[0], row[6]]), [['3', '-'], ['4', '-']], 'a name revokes nothing')
  })

  test('keys list on an empty database prints nothing; --json prints []', async () => {
    const { env } = await fresh()
    const list = await cli(['keys', 'list'], env)
    assertOk(list)
    assert.equal(list.stdout, '')
    assert.equal((await cli(['keys', 'list', '--json'], env)).stdout, '[]\n')
  })

  test('orders import: a JSON array and NDJSON, int64 ids exact, upsert by id, the last duplicate wins', async () => {
    const { database, env } = await fresh()
    const array = file(
      `[\n  {"id": ${BEYOND_2_53}, "petId": ${MAX}, "quantity": 7, "shipDate": "2026-11-25T11:00:00+01:00", "complete": false, "status": "pending"},\n` +
        `  {"id": "${MAX}", "petId": "${BEYOND_2_53}", "status": "shipped", "complete": true},\n` +
        '  {"id": 3, "status": "cancelled"}\n]\n',
    )
    const imported = await cli(['orders', 'import', array], env)
    assertOk(imported)
    assert.equal(imported.stdout, `imported 3 orders from ${array}\n`)
    assert.equal(imported.stderr, '') // no progress when stderr is not a terminal

    const lines = file(
      `{"id": 10, "petId": 1, "quantity": 1}\n\r\n{"id": 11}\r\n{"id": 10, "petId": 2, "quantity": 2, "shipDate": "2026-12-01T08:00:00Z"}\n` +
        `{"id": ${MAX}, "petId": ${MAX}, "status": "shipped", "complete": true}\n`,
      'ndjson',
    )
    const second = await cli(['orders', 'import', lines], env)
    assertOk(second)
    assert.equal(second.stdout, `imported 4 orders from ${lines}\n`)

    assert.deepEqual(await listOrders(database), [
      { id: 10n, petId: 2n, quantity: 2, shipDate: '2026-12-01T08:00:00.000Z', complete: false },
      { id: 11n, complete: false },
      { id: BEYOND_2_53, petId: MAX, quantity: 7, shipDate: '2026-11-25T10:00:00.000Z', complete: false },
      { id: MAX, petId: MAX, complete: true },
    ])
  })

  test('orders import from a pipe or a FIFO: every record, read once (the input cannot be read again)', async () => {
    // 5,000 records of ~64 bytes: past the 64 KiB a first read of the input takes.
    const records = Array.from({ length: 5000 }, (_, i) => `{"id":${i + 1},"petId":${BEYOND_2_53},"quantity":${1 + (i % 9)}}`)
    const text = `${records.join('\n')}\n`
    const arrayText = `[${records.join(',')}]`
    for (const [input, how] of [[text, 'stdin'], [arrayText, 'stdin'], [text, 'fifo']] as const) {
      const { database, env } = await fresh()
      let result: { code: number | null; stdout: string; stderr: string }
      if (how === 'stdin') {
        result = await cliFromPipe(['orders', 'import', '/dev/stdin'], env, file(input, 'ndjson'))
      } else {
        const fifo = join(scratch, `orders-${++fileCount}.fifo`)
        assert.equal(spawnSync('mkfifo', [fifo]).status, 0)
        const importing = cli(['orders', 'import', fifo], env)
        // The writer opens the FIFO once, writes everything, closes: the import sees its end.
        await writeFile(fifo, input)
        result = await importing
      }
      assertOk(result)
      assert.match(result.stdout, /^imported 5000 orders from /, `${how}: ${result.stdout}`)
      const orders = await listOrders(database)
      assert.equal(orders.length, 5000, how)
      assert.equal(orders[0]!.id, 1n)
      assert.equal(orders.at(-1)!.petId, BEYOND_2_53)
    }
    // A refusal from a pipe: one line, nothing imported, the record placed without a second reading.
    const { database, env } = await fresh()
    assertOneLineError(await cliFromPipe(['orders', 'import', '/dev/stdin'], env, file(`${text}{"id": 0}\n`, 'ndjson')), 1, /\/dev\/stdin: line 5001: id must be an integer from 1 to .*; nothing was imported$/)
    assertOneLineError(await cliFromPipe(['orders', 'import', '/dev/stdin'], env, file(`${arrayText.slice(0, -1)},,]`)), 1, /\/dev\/stdin: after record 5000: malformed JSON: .*; nothing was imported$/)
    assert.deepEqual(await listOrders(database), [])
  })

  test('orders import: a bad record in the middle aborts everything, naming its position', async () => {
    const { database, env } = await fresh()
    // 25,000 good records first: the store has written (uncommitted) rows when the bad one comes.
    const good = Array.from({ length: 25_000 }, (_, i) => ({ id: i + 1, petId: 7, quantity: 1 }))
    const bad = { id: 25_001, quantity: 0 }
    const array = file(JSON.stringify([...good, bad, { id: 25_002 }]))
    assertOneLineError(
      await cli(['orders', 'import', array], env),
      1,
      /^petstore-orders: .*\.json: record 25001: quantity must be an integer from 1 to 2147483647, got 0; nothing was imported$/,
    )
    const lines = file(ndjson([...good.slice(0, 3), { id: 4, status: 'lost' }, { id: 5 }]), 'ndjson')
    assertOneLineError(
      await cli(['orders', 'import', lines], env),
      1,
      /\.ndjson: line 4: status must be one of pending, shipped, cancelled, got "lost"; nothing was imported$/,
    )
    assertOneLineError(
      await cli(['orders', 'import', file(ndjson([{ id: 1 }, { id: 2, price: 3 }]), 'ndjson')], env),
      1,
      /line 2: unknown field "price" \(an order has id, petId, quantity, shipDate, complete, status, cancelledAt, cancellationReason, metadata\); nothing was imported$/,
    )
    assertOneLineError(
      await cli(['orders', 'import', file('[{"id": 1, "complete": true}]')], env),
      1,
      /record 1: complete is true but status is "pending"; only a shipped order can be complete/,
    )
    assert.deepEqual(await listOrders(database), [])
  })

  test('orders import: an id of 2^63 is refused', async () => {
    const { database, env } = await fresh()
    for (const text of ['[{"id": 1}, {"id": 9223372036854775808}]', '{"id": 1}\n{"id": "9223372036854775808"}\n']) {
      assertOneLineError(
        await cli(['orders', 'import', file(text)], env),
        1,
        /(record|line) 2: id must be an integer from 1 to 9223372036854775807, got "?9223372036854775808"?; nothing was imported$/,
      )
    }
    assertOneLineError(await cli(['orders', 'import', file('[{"id": 1, "petId": -5}]')], env), 1, /record 1: petId must be an integer/)
    assert.deepEqual(await listOrders(database), [])
  })

  test('orders import: malformed JSON is reported by line and column; nothing imported', async () => {
    const { database, env } = await fresh()
    assertOneLineError(
      await cli(['orders', 'import', file('[\n  {"id": 1},\n  {"id": 2,, "petId": 3}\n]\n')], env),
      1,
      /\.json: line 3, column 12: malformed JSON: expected an object key; nothing was imported$/,
    )
    assertOneLineError(
      await cli(['orders', 'import', file('{"id": 1}\n{"id": 2\n{"id": 3}\n', 'ndjson')], env),
      1,
      /\.ndjson: line 2, column 9: malformed JSON: .*; nothing was imported$/,
    )
    assertOneLineError(
      await cli(['orders', 'import', file('[{"id": 1}, {"id": 2}')], env),
      1,
      /line 1, column 22: malformed JSON: unexpected end of file; nothing was imported$/,
    )
    // Cut short after a comma: the parser's own capitalised words became the message, without a place.
    assertOneLineError(
      await cli(['orders', 'import', file('[{"id": 1},')], env),
      1,
      /\.json: line 1, column 12: malformed JSON: unexpected end of file; nothing was imported$/,
    )
    assertOneLineError(await cli(['orders', 'import', file('not json\n')], env), 1, /line 1, column 1: malformed JSON/)
    assert.deepEqual(await listOrders(database), [])
  })

  test('orders import: a status that would move back aborts the import, naming the record; unchanged records are said; an empty file imports nothing', async () => {
    const { database, env } = await fresh()
    assertOk(await cli(['orders', 'import', file('[{"id": 1, "status": "cancelled"}, {"id": 2, "status": "shipped"}]')], env))
    // The error names the record, as a bad record's does.
    assertOneLineError(
      await cli(['orders', 'import', file(ndjson([{ id: 5 }, { id: 1, status: 'pending' }, { id: 6 }]), 'ndjson')], env),
      1,
      /\.ndjson: line 2: order 1 is cancelled and cannot become pending; nothing was imported$/,
    )
    assertOneLineError(
      await cli(['orders', 'import', file(JSON.stringify([{ id: 5 }, { id: 6 }, { id: 2, status: 'pending' }]))], env),
      1,
      /\.json: record 3: order 2 is shipped and cannot become pending; nothing was imported$/,
    )
    assert.deepEqual((await listOrders(database)).map((o) => o.id), [2n])
    // A re-import of records the database already holds as they are: said, not hidden.
    const same = file(ndjson([{ id: 2, status: 'shipped' }]), 'ndjson')
    const unchanged = await cli(['orders', 'import', same], env)
    assertOk(unchanged)
    assert.equal(unchanged.stdout, `imported 1 order from ${same}: all unchanged, the database already held them as they are\n`)
    const changed = await cli(['orders', 'import', file(ndjson([{ id: 2, status: 'shipped' }, { id: 7 }]), 'ndjson')], env)
    assert.match(changed.stdout, /^imported 2 orders from \S+\n$/)
    const empty = await cli(['orders', 'import', file('')], env)
    assertOk(empty)
    assert.match(empty.stdout, /^imported 0 orders from /)
  })

  test('orders import: a cancelled order\'s time and reason; refused on another status; never changed once cancelled', async () => {
    const { database, env } = await fresh()
    assertOk(await cli(['orders', 'import', file(ndjson([
      { id: 1, status: 'cancelled', cancelledAt: '2026-11-20T09:15:00.5+01:00', cancellationReason: 'out_of_stock' },
      { id: 2 },
    ]), 'ndjson')], env))
    assertOneLineError(
      await cli(['orders', 'import', file(ndjson([{ id: 3 }, { id: 4, status: 'shipped', cancelledAt: '2026-11-20T08:15:00Z' }]), 'ndjson')], env),
      1,
      /\.ndjson: line 2: order 4: cancelledAt is given but status is "shipped"; only a cancelled order has one; nothing was imported$/,
    )
    assertOneLineError(
      await cli(['orders', 'import', file('[{"id": 5, "status": "cancelled", "cancellationReason": "bored"}]')], env),
      1,
      /record 1: cancellationReason must be one of customer_request, out_of_stock, duplicate, fraudulent, other, got "bored"; nothing was imported$/,
    )
    // Imported again with another time and reason, and order 2 cancelled by an import: the first cancellation stays.
    assertOk(await cli(['orders', 'import', file(ndjson([
      { id: 1, status: 'cancelled', quantity: 4, cancelledAt: '2026-11-21T00:00:00Z', cancellationReason: 'duplicate' },
      { id: 2, status: 'cancelled', cancelledAt: '2026-11-22T00:00:00Z', cancellationReason: 'fraudulent' },
    ]), 'ndjson')], env))
    assertOk(await cli(['orders', 'import', file(ndjson([{ id: 2, status: 'cancelled', cancellationReason: 'other' }]), 'ndjson')], env))
    await withStore(database, async (store) => {
      const one = await store.orders.find(1n)
      assert.deepEqual([one?.quantity, one?.cancelledAt, one?.cancellationReason], [4, '2026-11-20T08:15:00.500Z', 'out_of_stock'])
      const two = await store.orders.find(2n)
      assert.deepEqual([two?.cancelledAt, two?.cancellationReason], ['2026-11-22T00:00:00.000Z', 'fraudulent'])
      assert.equal(await store.orders.find(3n), undefined)
    })
  })

  test('orders ship: pending → shipped; again: says so, exit 0; cancelled: refused; unknown: error', async () => {
    const { database, env } = await fresh()
    assertOk(await cli(['orders', 'import', file(`[{"id": 1}, {"id": 2, "status": "cancelled"}, {"id": ${MAX}}]`)], env))
    const shipped = await cli(['orders', 'ship', '1'], env)
    assertOk(shipped)
    assert.equal(shipped.stdout, 'order 1 shipped\n')
    const again = await cli(['orders', 'ship', '1'], env)
    assertOk(again)
    assert.equal(again.stdout, 'order 1 was already shipped; nothing changed\n')
    assertOk(await cli(['orders', 'ship', MAX.toString()], env))
    assertOneLineError(await cli(['orders', 'ship', '2'], env), 1, /^petstore-orders: order 2 is cancelled; a cancelled order cannot be shipped$/)
    assertOneLineError(await cli(['orders', 'ship', '404'], env), 1, /^petstore-orders: order 404 does not exist$/)
    await withStore(database, async (store) => {
      // Through the store's ship, as the API's: shippedAt set, with its event.
      const one = await store.orders.find(1n)
      assert.match(one?.shippedAt ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      assert.equal(await eventTypes(store, 1n), 'order.created order.shipped')
      assert.equal((await store.orders.cancel(1n, null)).outcome, 'already_shipped')
      assert.equal((await store.orders.cancel(MAX, null)).outcome, 'already_shipped')
    })
  })

  test('orders complete: shipped → complete; again: says so, exit 0; pending and cancelled: refused; unknown: error', async () => {
    const { database, env } = await fresh()
    const orders = `[{"id": 1}, {"id": 2, "status": "cancelled"}, {"id": 3, "status": "shipped"}, {"id": ${MAX}, "status": "shipped", "complete": true}]`
    assertOk(await cli(['orders', 'import', file(orders)], env))
    assertOneLineError(
      await cli(['orders', 'complete', '1'], env),
      1,
      /^petstore-orders: order 1 is pending; only a shipped order can be completed \(ship it first: orders ship 1\)$/,
    )
    assertOk(await cli(['orders', 'ship', '1'], env))
    const completed = await cli(['orders', 'complete', '1'], env)
    assertOk(completed)
    assert.equal(completed.stdout, 'order 1 completed\n')
    const again = await cli(['orders', 'complete', '1'], env)
    assertOk(again)
    assert.equal(again.stdout, 'order 1 was already complete; nothing changed\n')
    assert.equal((await cli(['orders', 'complete', '3'], env)).stdout, 'order 3 completed\n')
    assert.equal((await cli(['orders', 'complete', MAX.toString()], env)).stdout, `order ${MAX} was already complete; nothing changed\n`)
    assertOneLineError(await cli(['orders', 'complete', '2'], env), 1, /^petstore-orders: order 2 is cancelled; a cancelled order cannot be completed$/)
    assertOneLineError(await cli(['orders', 'complete', '404'], env), 1, /^petstore-orders: order 404 does not exist$/)
    await withStore(database, async (store) => {
      const one = await store.orders.find(1n)
      assert.equal(one?.complete, true)
      assert.ok(one?.shippedAt !== null && one?.completedAt !== null && one!.completedAt! >= one!.shippedAt!)
      assert.equal(await eventTypes(store, 1n), 'order.created order.shipped order.completed')
      // An imported shipped order completed here: completedAt, no shippedAt (not known).
      const three = await store.orders.find(3n)
      assert.deepEqual([three?.complete, three?.shippedAt, typeof three?.completedAt], [true, null, 'string'])
      assert.equal((await store.orders.find(MAX))?.completedAt, null, 'an imported complete order stays without completedAt')
      assert.equal((await store.orders.find(2n))?.status, 'cancelled')
    })
  })

  test('pets import: JSON array and NDJSON, ids exact; a bad pet aborts the import', async () => {
    const { database, env } = await fresh()
    const array = await cli(['pets', 'import', file(`[{"id": ${MAX}, "name": "Rex", "tag": "dog"}, {"id": 2, "name": "Tom"}]`)], env)
    assertOk(array)
    assert.match(array.stdout, /^imported 2 pets from /)
    assertOk(await cli(['pets', 'import', file(ndjson([{ id: BEYOND_2_53.toString(), name: 'Zoë 🐈' }, { id: 2, name: 'Tom', tag: 'cat' }]), 'ndjson')], env))
    assertOneLineError(
      await cli(['pets', 'import', file(ndjson([{ id: 3, name: 'Kit' }, { id: 4, name: '' }]), 'ndjson')], env),
      1,
      /line 2: name must be 1 to 200 characters and not blank, got ""; nothing was imported$/,
    )
    assertOneLineError(await cli(['pets', 'import', file('[{"id": 5, "name": 5}]')], env), 1, /record 1: name must be a string, got 5/)
    await withStore(database, async (store) => {
      assert.deepEqual(await store.pets.find(MAX), { id: MAX, name: 'Rex', tag: 'dog' })
      assert.deepEqual(await store.pets.find(BEYOND_2_53), { id: BEYOND_2_53, name: 'Zoë 🐈' })
      assert.deepEqual(await store.pets.find(2n), { id: 2n, name: 'Tom', tag: 'cat' })
      assert.equal(await store.pets.find(3n), undefined)
    })
  })

  test('seed: demo orders and their pets, deterministic, idempotent, refused rather than moving a status back', async () => {
    const { database, env } = await fresh()
    const seeded = await cli(['seed', '--orders', '2000', '--seed', '7'], env)
    assertOk(seeded)
    assert.equal(seeded.stdout, 'seeded 2000 orders (ids 1 to 2000) and 500 pets (ids 1 to 500) with seed 7\n')
    assert.equal(seeded.stderr, '')
    const orders = await listOrders(database)
    // About 10% are cancelled, so not listed.
    assert.ok(orders.length > 1700 && orders.length < 1900, `${orders.length} orders listed`)
    assert.ok(orders.some((o) => o.complete) && orders.some((o) => !o.complete))
    for (const order of orders) {
      assert.ok(order.quantity! >= 1 && order.quantity! <= 10)
      assert.ok(order.petId! >= 1n && order.petId! <= 500n)
    }
    await withStore(database, async (store) => {
      assert.ok((await store.pets.find(500n)) !== undefined)
      assert.equal(await store.pets.find(501n), undefined)
    })
    // Again with the same seed: nothing changes.
    assertOk(await cli(['seed', '--orders', '2000', '--seed', '7'], env))
    assert.deepEqual(await listOrders(database), orders)
    // Another seed on the same ids would revive cancelled orders: refused, nothing written.
    assertOneLineError(
      await cli(['seed', '--orders', '2000', '--seed', '8'], env),
      1,
      /^petstore-orders: order \d+ is (cancelled|shipped) and cannot become \w+; nothing was seeded \(use --first-id to seed other ids\)$/,
    )
    assert.deepEqual(await listOrders(database), orders)
    // Other ids, up to the largest: accepted.
    const more = await cli(['seed', '--orders', '10', '--first-id', (MAX - 9n).toString(), '--seed', '8'], env)
    assertOk(more)
    assert.equal(more.stdout, `seeded 10 orders (ids ${MAX - 9n} to ${MAX}) and 3 pets (ids 1 to 3) with seed 8\n`)
  })

  test('serve --demo: seeds an empty store; keeps its demo key (0600) across restarts, replaces a revoked one; exits 0 on SIGTERM', async () => {
    const { database, env } = await fresh()
    const cwd = mkdtempSync(join(tmpdir(), 'petstore-demo-cwd-')) // where a PostgreSQL database's key is kept
    cleanups.push(async () => rmSync(cwd, { recursive: true, force: true }))
    const keyFile = demoKeyPath(database.config, cwd)
    const first = await startDemo(env, cwd)
    assert.match(first.output, /1000 demo orders seeded/)
    assert.match(first.output, new RegExp(`\\(new, kept in ${escape(keyFile)} and printed at each start\\)`))
    const response = await fetch(first.url, { headers: bearer(first.key) })
    assert.equal(response.status, 200)
    const listed = (await response.json()) as unknown[]
    assert.ok(listed.length > 800 && listed.length < 1000, `${listed.length} orders`)
    assert.equal(await first.stop(), 0)
    assert.equal(statSync(keyFile).mode & 0o777, 0o600)
    assert.equal(readFileSync(keyFile, 'utf8'), `${first.key}\n`)

    // Orders present: kept as they are. The same key, still working: a KEY= in a shell survives a restart.
    const second = await startDemo(env, cwd)
    assert.match(second.output, /orders: the ones already in the database/)
    assert.match(second.output, /the same as the last start/)
    assert.equal(second.key, first.key)
    assert.equal((await fetch(second.url, { headers: bearer(second.key) })).status, 200)
    assert.equal(await second.stop(), 0)

    // The stored key revoked: the next start makes a new one, works, and keeps it instead.
    assertOk(await cli(['keys', 'revoke', first.key.slice(0, 12)], env))
    chmodSync(keyFile, 0o644)
    const third = await startDemo(env, cwd)
    assert.notEqual(third.key, first.key)
    assert.match(third.output, /\(new, kept in/)
    assert.equal((await fetch(third.url, { headers: bearer(third.key) })).status, 200)
    assert.equal((await fetch(third.url, { headers: bearer(first.key) })).status, 401)
    assert.equal(await third.stop(), 0)
    assert.equal(readFileSync(keyFile, 'utf8'), `${third.key}\n`)
    assert.equal(statSync(keyFile).mode & 0o777, 0o600)
    await withStore(database, async (store) => {
      const keys = await store.apiKeys.list()
      assert.deepEqual(
        keys.map((key) => [key.name, key.revokedAt !== null]),
        [
          ['demo', true],
          ['demo', false],
        ],
      )
    })
  })

  test('serve --demo: a key that cannot be kept is still printed and works, and says it was not kept', async () => {
    const { database, env } = await fresh()
    const cwd = mkdtempSync(join(tmpdir(), 'petstore-demo-cwd-'))
    cleanups.push(async () => rmSync(cwd, { recursive: true, force: true }))
    mkdirSync(demoKeyPath(database.config, cwd), { recursive: true }) // a directory where the file would go
    const demo = await startDemo(env, cwd)
    assert.match(demo.output, /\(new, not kept: the next start makes another\)/)
    assert.equal((await fetch(demo.url, { headers: bearer(demo.key) })).status, 200)
    assert.equal(await demo.stop(), 0)
  })
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
