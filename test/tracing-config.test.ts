import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer, type Socket } from 'node:net'
import { describe, it } from 'node:test'
import { loadConfig, SECRET_SETTINGS, SETTINGS, tracingConfig } from '../src/config.js'
import { startServer } from '../src/server.js'
import { assertOneLineError, cli } from './support/cli.js'
import { spawnServer } from './support/server-process.js'

// When tracing is on, and what a bad OpenTelemetry variable gets: the rules of config.ts, then the
// CLI's one line, then that a server started with none of them loads no SDK.

/**
 * The rule as a document states it: `on when A, B or C=v is set, and off otherwise — always off with
 * D=v or E=v`; each item a variable set to anything, or to the value given.
 */
function statedRule(path: string): { on: [string, string | undefined][]; off: [string, string][] } {
  const text = readFileSync(new URL(`../${path}`, import.meta.url), 'utf8').replace(/\s+/g, ' ')
  const match = /on when (.*?) is set, and off otherwise — always off with (.*?)[.:(]/.exec(text)
  assert.ok(match !== null, `${path} states when tracing is on`)
  const items = (list: string): [string, string | undefined][] =>
    [...list.matchAll(/`([A-Z_]+)(?:=([^`]+))?`/g)].map((item) => [item[1]!, item[2]])
  return { on: items(match[1]!), off: items(match[2]!) as [string, string][] }
}

/** A value a variable may well be given, that is no value of the rule's own. */
function plausible(name: string, dir: string): string {
  if (name.endsWith('_FILE')) {
    const file = join(dir, name)
    writeFileSync(file, name.includes('HEADERS') ? 'x-api-key=1' : 'postgres://db/orders')
    return file
  }
  const values: Record<string, string> = {
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=1',
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-api-key=1',
    OTEL_SDK_DISABLED: 'false',
  }
  return values[name] ?? (name.endsWith('_URL') || name.endsWith('ENDPOINT') ? 'http://collector:4318' : '1')
}

describe("tracing's rule as the README and production.md state it, held to tracingConfig", () => {
  for (const path of ['README.md', 'docs/production.md']) {
    it(`${path}: each variable it names turns tracing on alone, no other setting does, and each it names turns it off`, () => {
      const { on, off } = statedRule(path)
      assert.ok(on.length > 0 && off.length > 0, `${path} names variables`)
      const dir = mkdtempSync(join(tmpdir(), 'petstore-tracing-rule-'))
      try {
        const turnsOn = new Map(on.map(([name, value]) => [name, value ?? plausible(name, dir)]))
        for (const [name, value] of turnsOn) assert.notEqual(tracingConfig({ [name]: value }), undefined, `${name}=${value} turns tracing on`)
        // Every other variable the service reads, set alone, leaves it off.
        const others = [...SETTINGS, ...SECRET_SETTINGS.map((name) => `${name}_FILE`)].filter((name) => !turnsOn.has(name))
        assert.ok(others.includes('OTEL_EXPORTER_OTLP_PROTOCOL') && others.includes('OTEL_SDK_DISABLED'))
        for (const name of others) assert.equal(tracingConfig({ [name]: plausible(name, dir) }), undefined, `${name} alone turns tracing on`)
        // Each way to turn it off wins over every way to turn it on.
        const all = Object.fromEntries(turnsOn)
        for (const [name, value] of off) assert.equal(tracingConfig({ ...all, [name]: value }), undefined, `${name}=${value} turns it off`)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })
  }
})

describe('tracing: on only when the OTEL_* variables ask for it', () => {
  it('is off with no variable, or only the resource\'s', () => {
    assert.equal(tracingConfig({}), undefined)
    assert.equal(tracingConfig({ OTEL_SERVICE_NAME: 'orders', OTEL_RESOURCE_ATTRIBUTES: 'a=b', OTEL_TRACES_SAMPLER: 'always_on' }), undefined)
  })

  it('is on when an OTLP endpoint is named, or the exporter is otlp; protobuf unless told JSON', () => {
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })?.protocol, 'http/protobuf')
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector/v1/traces' })?.protocol, 'http/protobuf')
    assert.equal(tracingConfig({ OTEL_TRACES_EXPORTER: 'otlp' })?.protocol, 'http/protobuf')
    assert.equal(tracingConfig({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })?.protocol, 'http/json')
    // The signal's own variable wins over the general one.
    assert.equal(
      tracingConfig({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })?.protocol,
      'http/protobuf',
    )
  })

  it('sends to the URL the SDK would read: the traces endpoint as written, else /v1/traces under the general one, else its default', () => {
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })?.endpoint, 'http://collector:4318/v1/traces')
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/otlp/' })?.endpoint, 'http://collector:4318/otlp/v1/traces')
    assert.equal(
      tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/custom' })?.endpoint,
      'https://traces.example/custom',
    )
    assert.equal(tracingConfig({ OTEL_TRACES_EXPORTER: 'otlp' })?.endpoint, 'http://localhost:4318/v1/traces')
  })

  it('is off when OTEL_SDK_DISABLED is true (in any case) or the exporter is none', () => {
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }), undefined)
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }), undefined)
    assert.equal(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'no' })?.protocol, 'http/protobuf')
  })

  it('refuses what it cannot do, naming the variable', () => {
    assert.throws(() => tracingConfig({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), /^ConfigError: OTEL_EXPORTER_OTLP_PROTOCOL: .*grpc is not supported/)
    assert.throws(() => tracingConfig({ OTEL_TRACES_EXPORTER: 'zipkin' }), /^ConfigError: OTEL_TRACES_EXPORTER: must be otlp or none/)
    assert.throws(() => tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }), /^ConfigError: OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:\/\/ or https:\/\/ URL/)
  })

  it('serve stops at start with one line naming the variable, and exit 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-tracing-'))
    try {
      const result = await cli(['serve'], {
        DATABASE_URL: `sqlite:${join(dir, 'db.sqlite')}`,
        PORT: '0',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc',
      })
      assertOneLineError(result, 1, /^petstore-orders: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: must be http\/protobuf or http\/json \(grpc is not supported\), got "grpc"$/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('a server started without them loads no OpenTelemetry SDK, exporter or instrumentation', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-tracing-'))
    const server = await startServer(loadConfig({ DATABASE_URL: `sqlite:${join(dir, 'db.sqlite')}`, PORT: '0', LOG_LEVEL: 'silent' }))
    try {
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200)
      const loaded = Object.keys(createRequire(import.meta.url).cache).filter((path) => /@opentelemetry[\\/](sdk-|exporter-|instrumentation|resources)/.test(path))
      assert.deepEqual(loaded, [])
    } finally {
      await server.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('a collector that never answers holds a shutdown for the exporter\'s timeout, then the server says so and exits 0', async () => {
    // Takes connections and never answers them.
    const sockets = new Set<Socket>()
    const silent = createServer((socket) => void sockets.add(socket))
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    const dir = mkdtempSync(join(tmpdir(), 'petstore-tracing-'))
    try {
      const { port } = silent.address() as { port: number }
      const server = await spawnServer(`sqlite:${join(dir, 'db.sqlite')}`, {
        LOG_LEVEL: 'info',
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
      })
      assert.equal((await fetch(`${server.origin}/v1/store/orders`)).status, 401) // a span, held for export
      server.child.kill('SIGTERM')
      assert.deepEqual(await server.exited, { code: 0, signal: null }, server.output())
      assert.match(server.output(), /"component":"opentelemetry".*"msg":"the last spans could not be exported"/)
      assert.match(server.output(), /"msg":"stopped"/)
      assert.ok(sockets.size > 0, 'the exporter did try to send')
    } finally {
      for (const socket of sockets) socket.destroy()
      silent.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
