/**
 * Variables that look like this service's settings but are not one are warned about by name: serve
 * in its log, every other command on stderr. Their values are never printed.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { KNOWN_VARIABLES, SETTINGS } from '../src/config.js'
import { SETTING_PREFIXES, unknownVariables } from '../src/unknown-variables.js'
import { assertOk, cli } from './support/cli.js'
import { spawnServer } from './support/server-process.js'

const scratch = mkdtempSync(join(tmpdir(), 'petstore-unknown-variables-'))
after(() => rmSync(scratch, { recursive: true, force: true }))

/** What is said of each of `names`, set together: name → hint, or null when no hint. */
function warned(names: string[]): Record<string, string | null> {
  return Object.fromEntries(unknownVariables(Object.fromEntries(names.map((name) => [name, 'x']))).map(({ name, hint }) => [name, hint ?? null]))
}

describe('which variables are warned about', () => {
  it('near misses of a setting, in any case, with the setting meant', () => {
    assert.deepEqual(warned(['DATABSE_URL', 'REDIS_ULR', 'LOG_LEVL', 'database_url', 'WEBHOOKS_TIMEOUT_MS', 'OTEL_EXPORTER_OTLP_ENDPIONT', 'REDIS_URL_FIEL']), {
      DATABSE_URL: 'did you mean DATABASE_URL?',
      OTEL_EXPORTER_OTLP_ENDPIONT: 'did you mean OTEL_EXPORTER_OTLP_ENDPOINT?',
      LOG_LEVL: 'did you mean LOG_LEVEL?',
      REDIS_ULR: 'did you mean REDIS_URL?',
      REDIS_URL_FIEL: 'did you mean REDIS_URL_FILE?',
      WEBHOOKS_TIMEOUT_MS: 'did you mean WEBHOOK_TIMEOUT_MS?',
      database_url: 'did you mean DATABASE_URL?',
    })
  })

  it('a name with one of its prefixes that is no setting; a retired name; a file for what is not a secret', () => {
    assert.deepEqual(warned(['WEBHOOK_SECRET', 'REDIS_HOST', 'HTTP_TIMEOUT_MS', 'PETSTORE_LOG', 'RATE_LIMIT_REDIS_URL', 'PORT_FILE']), {
      HTTP_TIMEOUT_MS: null,
      PETSTORE_LOG: null,
      PORT_FILE: 'only DATABASE_URL, REDIS_URL, OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS can be given as a file',
      RATE_LIMIT_REDIS_URL: 'did you mean REDIS_URL?',
      REDIS_HOST: null,
      WEBHOOK_SECRET: null,
    })
  })

  it('never the system\'s, the proxies\', the OpenTelemetry SDK\'s own, libpq\'s, those Kubernetes sets for each service, or the client examples\' key', () => {
    const foreign = [
      ...['HOME', 'PATH', 'HOSTNAME', 'TERM', 'PWD', 'OLDPWD', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'TZ', 'TMPDIR', 'NODE_ENV', 'NODE_OPTIONS', 'HOSTTYPE', 'DEBUG'],
      ...['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy'],
      ...['OTEL_SERVICE_NAME', 'OTEL_RESOURCE_ATTRIBUTES', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG', 'OTEL_BSP_SCHEDULE_DELAY', 'OTEL_LOG_LEVEL'],
      ...['OTEL_EXPORTER_OTLP_TIMEOUT', 'OTEL_EXPORTER_OTLP_COMPRESSION', 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', 'OTEL_EXPORTER_OTLP_CERTIFICATE'],
      ...['OTEL_METRICS_EXPORTER', 'OTEL_LOGS_EXPORTER', 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT', 'OTEL_EXPORTER_OTLP_LOGS_PROTOCOL', 'OTEL_EXPORTER_OTLP_LOGS_HEADERS'],
      ...['PGHOST', 'PGPORT', 'PGUSER', 'PGPASSWORD', 'PGDATABASE'],
      ...['REDIS_PORT', 'REDIS_SERVICE_HOST', 'REDIS_SERVICE_PORT', 'REDIS_SERVICE_PORT_REDIS', 'REDIS_PORT_6379_TCP', 'REDIS_PORT_6379_TCP_ADDR', 'REDIS_PORT_6379_TCP_PORT', 'REDIS_PORT_6379_TCP_PROTO'],
      ...['DATABASE_PORT', 'DATABASE_SERVICE_HOST', 'HTTP_PORT', 'PETSTORE_ORDERS_PORT', 'PETSTORE_ORDERS_SERVICE_HOST', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_PORT_443_TCP_ADDR'],
      'PETSTORE_API_KEY',
    ]
    assert.deepEqual(warned(foreign), {})
  })

  it('never a setting, nor a secret\'s _FILE form; the prefixes are those of settings', () => {
    assert.deepEqual(warned([...KNOWN_VARIABLES]), {})
    for (const prefix of SETTING_PREFIXES) assert.ok(SETTINGS.some((name) => name.startsWith(prefix)), `${prefix} starts no setting`)
  })
})

describe('what is said', () => {
  const secret = 'never-shown-5e'
  const mistakes = { DATABSE_URL: `postgres://u:${secret}@db/x`, WEBHOOK_SECRET: secret, REDIS_ULR: secret }

  it('a CLI command: one warning line each on stderr, names only, before its own output; the command runs', async () => {
    const result = await cli(['migrate'], { ...mistakes, DATABASE_URL: `sqlite:${join(scratch, 'cli.db')}` })
    assertOk(result)
    const lines = result.stderr.split('\n')
    assert.deepEqual(lines.slice(0, 3), [
      'petstore-orders: warning: DATABSE_URL is not a setting of this service; did you mean DATABASE_URL?',
      'petstore-orders: warning: REDIS_ULR is not a setting of this service; did you mean REDIS_URL?',
      'petstore-orders: warning: WEBHOOK_SECRET is not a setting of this service',
    ])
    assert.match(lines[3]!, /^petstore-orders: created a new SQLite database/)
    assert.ok(!result.stderr.includes(secret) && !result.stdout.includes(secret))
  })

  it('a command that then fails: the warning says why, before the one error line', async () => {
    // DATABASE_URL mistyped, so unset: the default database, which is not there.
    const result = await cli(['keys', 'list'], { DATABSE_URL: `sqlite:${join(scratch, 'cli.db')}` }, scratch)
    assert.equal(result.code, 1)
    assert.match(result.stderr, /^petstore-orders: warning: DATABSE_URL is not a setting of this service; did you mean DATABASE_URL\?\npetstore-orders: no SQLite database at .*\(DATABASE_URL is unset\);[^\n]*\n$/)
  })

  it('no warning before a usage error or help: the command line is wrong, nothing runs', async () => {
    const usage = await cli(['keys', 'list', '--nope'], mistakes)
    assert.equal(usage.code, 2)
    assert.match(usage.stderr, /^petstore-orders: unknown option --nope;[^\n]*\n$/)
    const help = await cli(['keys', 'list', '--help'], mistakes)
    assert.equal(help.stderr, '')
  })

  it('serve: one warn line each in its JSON log, with the variable\'s name, and nothing on stderr', async () => {
    const server = await spawnServer(`sqlite:${join(scratch, 'serve.db')}`, mistakes)
    server.child.kill('SIGTERM')
    await server.exited
    const lines = server.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as { level: number; variable?: string; msg: string })
    assert.deepEqual(
      lines.filter((line) => line.variable !== undefined).map(({ level, variable, msg }) => ({ level, variable, msg })),
      [
        { level: 40, variable: 'DATABSE_URL', msg: 'DATABSE_URL is not a setting of this service; did you mean DATABASE_URL?' },
        { level: 40, variable: 'REDIS_ULR', msg: 'REDIS_ULR is not a setting of this service; did you mean REDIS_URL?' },
        { level: 40, variable: 'WEBHOOK_SECRET', msg: 'WEBHOOK_SECRET is not a setting of this service' },
      ],
    )
    assert.doesNotMatch(server.output(), /petstore-orders: warning/)
    assert.ok(!server.output().includes(secret))
  })
})
