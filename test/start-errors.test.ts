/**
 * The settings a new user got wrong, as `serve` answers them: one line naming the setting, what is
 * wrong and the form it takes; exit 1, and nothing made (not even the SQLite file).
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, it } from 'node:test'
import { assertOneLineError, cli } from './support/cli.js'
import { freePort } from './support/server-process.js'

const scratch = mkdtempSync(join(tmpdir(), 'petstore-start-errors-'))
after(() => rmSync(scratch, { recursive: true, force: true }))
const databasePath = join(scratch, 'never-made.db')

const HOST_FORM = 'expected an address of this machine: 0\\.0\\.0\\.0 for every interface, 127\\.0\\.0\\.1 for this machine only, or a name that resolves to one'

/** `serve` with `env` (and PORT 0), which must stop at start with one line matching `pattern`. */
async function refused(env: Record<string, string>, pattern: RegExp): Promise<void> {
  const result = await cli(['serve'], { DATABASE_URL: `sqlite:${databasePath}`, PORT: '0', ...env }, scratch)
  assertOneLineError(result, 1, pattern)
  assert.ok(!existsSync(databasePath), `the database was made: ${result.stderr}`)
}

it('REDIS_URL without its scheme: the form redis://HOST:6379, or rediss:// for TLS', async () => {
  for (const value of ['localhost:6379', 'cache.internal', 'http://cache:6379']) {
    await refused({ REDIS_URL: value }, /^petstore-orders: REDIS_URL: must be a URL of the form redis:\/\/HOST:6379, or rediss:\/\/HOST:6379 for TLS \(its value is not shown: it may hold a password\)$/)
  }
})

it('a HOST that does not resolve, and one of digits and dots that is no address: what is wrong and what HOST takes', async () => {
  // `.invalid` never resolves; a resolver that does not answer at all is said too.
  await refused({ HOST: 'nonexistent.invalid' }, new RegExp(`^petstore-orders: HOST: "nonexistent\\.invalid" (does not resolve to an address|could not be resolved now \\(no answer from the name server\\)); ${HOST_FORM}$`))
  await refused({ HOST: '0.0.0.0.0' }, new RegExp(`^petstore-orders: HOST: "0\\.0\\.0\\.0\\.0" is not an IPv4 address; ${HOST_FORM}$`))
})

it('a HOST that is an address of another machine', async () => {
  // 192.0.2.1 is reserved for documentation (RFC 5737): no machine has it.
  await refused({ HOST: '192.0.2.1' }, new RegExp(`^petstore-orders: HOST: "192\\.0\\.2\\.1" is not an address of this machine; ${HOST_FORM}$`))
})

it('a PORT another process listens on', async () => {
  const port = await freePort()
  const other = createServer()
  await new Promise<void>((resolve) => other.listen(port, '127.0.0.1', resolve))
  try {
    await refused({ PORT: String(port) }, new RegExp(`^petstore-orders: PORT: ${port} is already in use on 127\\.0\\.0\\.1 by another process; choose another, or stop that one$`))
  } finally {
    other.close()
  }
})

it('an OTLP protocol without its http/: the one meant', async () => {
  const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }
  await refused({ ...tracing, OTEL_EXPORTER_OTLP_PROTOCOL: 'json' }, /^petstore-orders: OTEL_EXPORTER_OTLP_PROTOCOL: must be http\/protobuf or http\/json \(grpc is not supported\), got "json"; did you mean http\/json\?$/)
  await refused({ ...tracing, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'protobuf' }, /^petstore-orders: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: .*, got "protobuf"; did you mean http\/protobuf\?$/)
  await refused({ ...tracing, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^petstore-orders: OTEL_EXPORTER_OTLP_PROTOCOL: must be http\/protobuf or http\/json \(grpc is not supported\), got "grpc"$/)
})
