import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer, type Socket } from 'node:net'
import { describe, it } from 'node:test'
import { loadConfig, tracingConfig } from '../src/config.js'
import { startServer } from '../src/server.js'
import { assertOneLineError, cli } from './support/cli.js'
import { spawnServer } from './support/server-process.js'

// When tracing is on, and what a bad OpenTelemetry variable gets: the rules of config.ts, then the
// CLI's one line, then that a server started with none of them loads no SDK.

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
