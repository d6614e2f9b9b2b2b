import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { redactUrl, withoutCredentials } from '../src/redact-url.js'
import { BIN } from './support/server-process.js'

const SECRET = 's3cret-Pa55'

describe('withoutCredentials: where a URL points, and nothing that may be a credential', () => {
  for (const [input, expected] of [
    ['https://collector:s3cret-Pa55@otel.example:4318/v1/traces', 'https://otel.example:4318/v1/traces'],
    ['https://otel.example/v1/traces?api-key=s3cret-Pa55#frag', 'https://otel.example/v1/traces'],
    ['http://localhost:4318/v1/traces', 'http://localhost:4318/v1/traces'],
    ['http://[::1]:4318/otlp/v1/traces', 'http://[::1]:4318/otlp/v1/traces'],
  ] as const) {
    it(`${input} → ${expected}`, () => {
      assert.equal(withoutCredentials(input), expected)
    })
  }
})

describe('redactUrl', () => {
  for (const [input, expected] of [
    ['postgres://petstore:s3cret-Pa55@db.internal:5432/petstore', 'postgres://petstore:***@db.internal:5432/petstore'],
    ['redis://:s3cret-Pa55@cache:6379/0', 'redis://:***@cache:6379/0'],
    ['rediss://default:s3cret-Pa55@cache.example:6380', 'rediss://default:***@cache.example:6380'],
    ['https://user:s3cret-Pa55@api.example/v1', 'https://user:***@api.example/v1'],
    // Not valid URLs, still redacted: an unescaped @ or / in the password, a bad port.
    ['postgres://u:s3cret@Pa55@db/x', 'postgres://u:***@db/x'],
    ['postgres://u:s3cret/Pa55@db/x', 'postgres://u:***@db/x'],
    ['redis://u:s3cret-Pa55@cache:port', 'redis://u:***@cache:port'],
    // Credentials in the query.
    ['postgres://db/petstore?user=u&password=s3cret-Pa55&sslmode=require', 'postgres://db/petstore?user=u&password=***&sslmode=require'],
    ['postgresql://db/x?sslpassword=s3cret-Pa55', 'postgresql://db/x?sslpassword=***'],
    ['https://api.example/v1?access_token=s3cret-Pa55#x', 'https://api.example/v1?access_token=***#x'],
    // Inside a message, several of them.
    [
      'REDIS_URL: is not a valid URL: "redis://a:s3cret-Pa55@h:x"; was postgres://b:s3cret-Pa55@db/y',
      'REDIS_URL: is not a valid URL: "redis://a:***@h:x"; was postgres://b:***@db/y',
    ],
    // Nothing to redact: left exactly as written.
    ['postgres://petstore@db.internal/petstore', 'postgres://petstore@db.internal/petstore'],
    ['https://api.petstore.example/v1', 'https://api.petstore.example/v1'],
    ['sqlite:./data/petstore.db', 'sqlite:./data/petstore.db'],
    ['order 12 is cancelled', 'order 12 is cancelled'],
  ] as const) {
    it(`${input} → ${expected}`, () => {
      assert.equal(redactUrl(input), expected)
    })
  }
})

describe('no password in what the CLI prints', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-redact-'))
  after(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'orders.ndjson')
  writeFileSync(file, '{"id": 1}\n')

  function run(args: string[], env: Record<string, string>): { status: number | null; stdout: string; stderr: string } {
    const result = spawnSync(process.execPath, [BIN, ...args], {
      env: { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, ...env },
      encoding: 'utf8',
      timeout: 30_000,
    })
    return { status: result.status, stdout: result.stdout, stderr: result.stderr }
  }

  // Variables whose value may hold a password: never shown, whatever the password looks like (a
  // space or a quote in it once ended the redaction early, and the rest of the password was printed).
  const SPACED = 's3cret Pa55"x'
  for (const [variable, value, args] of [
    ['REDIS_URL', `redis://petstore:${SECRET}@cache:port`, ['serve']],
    ['REDIS_URL', `rediss://petstore:${SECRET}@[cache]:6379/0`, ['serve']],
    ['REDIS_URL', `redis://petstore:${SPACED}@cache:port`, ['serve']],
    ['DATABASE_URL', `postgres://petstore:${SECRET}@db:port/petstore`, ['serve']],
    ['DATABASE_URL', `postgres://petstore:${SECRET}@db:port/petstore`, ['orders', 'import', file]],
    ['DATABASE_URL', `postgres://petstore:${SECRET}@db:port/petstore`, ['keys', 'list']],
    ['DATABASE_URL', `postgres://petstore:${SPACED}@db:port/petstore`, ['serve']],
    ['DATABASE_URL', `postgresql://petstore:${SPACED}@db:port/petstore`, ['keys', 'list']],
  ] as const) {
    it(`${args.map((arg) => (arg === file ? 'FILE' : arg)).join(' ')} with a bad ${variable}: one line naming it and the problem, not the value`, () => {
      const { status, stdout, stderr } = run([...args], { [variable]: value })
      assert.equal(status, 1, stderr)
      assert.equal(stdout, '')
      for (const part of ['s3cret', 'Pa55', 'petstore:', '@']) assert.ok(!stderr.includes(part), `a part of the value was printed: ${stderr}`)
      const problem = variable === 'REDIS_URL' ? 'must be a URL of the form redis://HOST:6379, or rediss://HOST:6379 for TLS' : 'is not a valid URL'
      assert.equal(stderr, `petstore-orders: ${variable}: ${problem} (its value is not shown: it may hold a password)\n`)
    })
  }

  // Others (public URLs) may be shown, redacted.
  for (const [variable, value, args] of [
    ['PUBLIC_BASE_URL', `https://petstore:${SECRET}@api.example/v2`, ['serve']],
    ['STAGING_BASE_URL', `https://petstore:${SECRET}@staging.example:port/v1`, ['serve']],
    ['PETS_DEPRECATION_LINK', `https://petstore:${SECRET}@docs example`, ['serve']],
  ] as const) {
    it(`${args.join(' ')} with a bad ${variable}: one line naming it, the password replaced`, () => {
      const { status, stdout, stderr } = run([...args], { [variable]: value })
      assert.equal(status, 1, stderr)
      assert.equal(stdout, '')
      assert.ok(!stderr.includes(SECRET), `the password was printed: ${stderr}`)
      assert.match(stderr, new RegExp(`^petstore-orders: ${variable}: .*petstore:\\*\\*\\*@.*\\n$`))
    })
  }

  it('a database that refuses the connection: the error has no password either', () => {
    // Port 1 on the loopback: nothing listens there, the connection is refused at once.
    const { status, stderr } = run(['keys', 'list'], { DATABASE_URL: `postgres://petstore:${SECRET}@127.0.0.1:1/petstore`, PETSTORE_DEBUG: '1' })
    assert.equal(status, 1)
    assert.ok(!stderr.includes(SECRET), `the password was printed: ${stderr}`)
    assert.match(stderr, /^petstore-orders: /)
  })
})
