/**
 * Secrets given as files, as Docker and Kubernetes mount them: NAME_FILE names a file holding the
 * value of DATABASE_URL, REDIS_URL or the OTLP exporter's headers. Read by serve and by every CLI
 * command, never together with NAME, and what a file holds is never printed.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { SECRET_SETTINGS } from '../src/config.js'
import { openStore } from '../src/store/open-store.js'
import { assertOk, assertOneLineError, cli } from './support/cli.js'
import { bearer, createDatabase, forEachStore } from './support/harness.js'
import { startOtlpReceiver } from './support/otlp-receiver.js'
import { REDIS_URL, redisSkipReason } from './support/redis.js'
import { spawnServer } from './support/server-process.js'

const redisReason = await redisSkipReason()

const scratch = mkdtempSync(join(tmpdir(), 'petstore-secret-files-'))
after(() => rmSync(scratch, { recursive: true, force: true }))
let files = 0

/** A file in the scratch directory holding `content`. */
function secretFile(content: string): string {
  const path = join(scratch, `secret-${++files}`)
  writeFileSync(path, content)
  return path
}

forEachStore('DATABASE_URL_FILE', (kind) => {
  it('serve and the CLI commands use the database its file names; the newline echo ends a file with is not part of it', async () => {
    const database = await createDatabase(kind)
    after(() => database.dispose())
    const env = { DATABASE_URL_FILE: secretFile(`${database.url}\n`) }
    // Run elsewhere: the database of an unset DATABASE_URL would be ./data/petstore.db there.
    const cwd = mkdtempSync(join(scratch, 'cwd-'))
    assertOk(await cli(['migrate'], env, cwd))
    const created = await cli(['keys', 'create', '--name', 'from-a-file'], env, cwd)
    assertOk(created)
    const key = created.stdout.trim()
    assertOk(await cli(['orders', 'import', secretFile('[{"id": 7, "petId": 1, "quantity": 1}]')], env, cwd))
    assertOk(await cli(['orders', 'ship', '7'], env, cwd))
    assertOk(await cli(['webhooks', 'list'], env, cwd))
    assert.match((await cli(['keys', 'list'], env, cwd)).stdout, /from-a-file/)
    const store = await openStore(database.config)
    try {
      assert.equal((await store.orders.find(7n))?.status, 'shipped', 'the commands wrote to the database the file names')
    } finally {
      await store.close()
    }

    const server = await spawnServer('', env) // DATABASE_URL empty: unset
    try {
      const response = await fetch(`${server.origin}/v2/store/orders/7`, { headers: bearer(key) })
      assert.equal(response.status, 200)
      assert.equal(((await response.json()) as { status: string }).status, 'shipped')
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
    }
  })
})

describe('a secret given as a file', () => {
  const dir = join(scratch, 'serve')
  mkdirSync(dir)
  // Where serve would make its database: nothing is made when the configuration is refused.
  const databasePath = join(dir, 'never-made.db')
  const serveEnv = { DATABASE_URL: `sqlite:${databasePath}` }

  it('is taken without the whitespace at either end: a Windows line end, a byte-order mark, spaces', async () => {
    const path = join(scratch, 'trimmed.db')
    const env = { DATABASE_URL_FILE: secretFile(`\uFEFF  sqlite:${path} \r\n`) }
    const result = await cli(['migrate'], env)
    assertOk(result)
    assert.ok(existsSync(path), result.stderr)
    assert.match(result.stderr, /created a new SQLite database at .*trimmed\.db \(named by DATABASE_URL_FILE\)/)
  })

  it('with the variable itself set too: one line naming both, exit 1, for serve and the CLI', async () => {
    for (const name of SECRET_SETTINGS) {
      const env = { ...serveEnv, [name]: 'set', [`${name}_FILE`]: secretFile('set in a file too\n') }
      assertOneLineError(await cli(['serve'], env), 1, new RegExp(`^petstore-orders: ${name}_FILE: cannot be set with ${name}: set one or the other$`))
    }
    const both = { DATABASE_URL: 'sqlite:x.db', DATABASE_URL_FILE: secretFile('sqlite:y.db\n') }
    for (const args of [['migrate'], ['keys', 'list'], ['orders', 'import', secretFile('[]')]]) {
      assertOneLineError(await cli(args, both, dir), 1, /^petstore-orders: DATABASE_URL_FILE: cannot be set with DATABASE_URL: set one or the other$/)
    }
    assert.ok(!existsSync(databasePath), 'serve made its database')
  })

  it('that cannot be read: one line naming the variable and the path, exit 1', async () => {
    const missing = join(scratch, 'no-such-secret')
    for (const name of SECRET_SETTINGS) {
      const result = await cli(['serve'], { ...serveEnv, [name]: '', [`${name}_FILE`]: missing })
      assertOneLineError(result, 1, new RegExp(`^petstore-orders: ${name}_FILE: cannot read ${missing}: no such file$`))
    }
    assertOneLineError(await cli(['keys', 'list'], { DATABASE_URL_FILE: missing }, dir), 1, /^petstore-orders: DATABASE_URL_FILE: cannot read .*no-such-secret: no such file$/)
    assertOneLineError(await cli(['migrate'], { DATABASE_URL_FILE: scratch }, dir), 1, /^petstore-orders: DATABASE_URL_FILE: cannot read .*: it is a directory$/)
    assertOneLineError(await cli(['migrate'], { DATABASE_URL_FILE: secretFile(' \n') }, dir), 1, /^petstore-orders: DATABASE_URL_FILE: .*secret-\d+ is empty$/)
    assert.ok(!existsSync(databasePath), 'serve made its database')
    assert.ok(!existsSync(join(dir, 'data')), 'a command made the default database')
  })

  it('is never printed, not even in part, when it is not what the setting takes', async () => {
    const password = `pw-${randomBytes(6).toString('hex')}`
    const database = await cli(['migrate'], { DATABASE_URL_FILE: secretFile(`mysql://admin:${password}@db/petstore\n`) }, dir)
    assertOneLineError(database, 1, /^petstore-orders: DATABASE_URL \(read from DATABASE_URL_FILE\): must be a postgres:\/\/, postgresql:\/\/ or sqlite: URL/)
    const unparsable = await cli(['keys', 'list'], { DATABASE_URL_FILE: secretFile(`postgres://admin:${password}@[db/petstore\n`), PETSTORE_DEBUG: '1' }, dir)
    assertOneLineError(unparsable, 1, /^petstore-orders: DATABASE_URL \(read from DATABASE_URL_FILE\): is not a valid URL \(its value is not shown/)
    const redis = await cli(['serve'], { ...serveEnv, REDIS_URL_FILE: secretFile(`redis://:${password}@[cache\n`) })
    assertOneLineError(redis, 1, /^petstore-orders: REDIS_URL \(read from REDIS_URL_FILE\): must be a URL of the form redis:\/\/HOST:6379, .*\(its value is not shown/)
    for (const result of [database, unparsable, redis]) {
      assert.ok(!result.stderr.includes(password) && !result.stderr.includes('admin'), result.stderr)
    }
  })

  it('REDIS_URL_FILE: serve counts its rate limits in that Redis', { skip: redisReason }, async () => {
    const prefix = `petstore-test:${randomBytes(6).toString('hex')}:`
    const server = await spawnServer(`sqlite:${join(scratch, 'redis.db')}`, { REDIS_URL_FILE: secretFile(`${REDIS_URL}\n`), RATE_LIMIT_REDIS_PREFIX: prefix })
    const redis = new Redis(REDIS_URL)
    try {
      assert.equal((await fetch(`${server.origin}/v1/store/orders`)).status, 401) // counted as an authentication failure
      assert.notDeepEqual(await redis.keys(`${prefix}*`), [])
    } finally {
      redis.disconnect()
      server.child.kill('SIGTERM')
      await server.exited
    }
  })

  it('OTEL_EXPORTER_OTLP_HEADERS_FILE and …_TRACES_HEADERS_FILE: the exporter sends their headers, merged as the SDK merges the variables, and nothing logs them', async () => {
    const receiver = await startOtlpReceiver()
    const general = `general-${randomBytes(6).toString('hex')}`
    const traces = `traces-${randomBytes(6).toString('hex')}`
    const server = await spawnServer(`sqlite:${join(scratch, 'traced.db')}`, {
      LOG_LEVEL: 'debug',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_EXPORTER_OTLP_HEADERS_FILE: secretFile(`x-api-key=${general},x-tenant=acme\n`),
      // The signal's own variable wins, header by header.
      OTEL_EXPORTER_OTLP_TRACES_HEADERS_FILE: secretFile(`x-api-key=${traces}\n`),
    })
    try {
      assert.equal((await fetch(`${server.origin}/v1/store/orders`)).status, 401)
      await receiver.waitFor((spans) => spans.length > 0)
      const sent = receiver.requests[0]!.headers
      assert.equal(sent['x-api-key'], traces)
      assert.equal(sent['x-tenant'], 'acme')
      server.child.kill('SIGTERM')
      await server.exited
      assert.ok(!server.output().includes(general) && !server.output().includes(traces), server.output())
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
      await receiver.close()
    }
  })
})
