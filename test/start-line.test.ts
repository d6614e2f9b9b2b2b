/**
 * The one line `serve` logs once it listens: the store, the address, tracing and the webhook
 * delivery slots, and never a user or a password. Read from the real process's stdout.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { createDatabase, forEachStore } from './support/harness.js'
import { BIN, freePort } from './support/server-process.js'

interface StartLine {
  level: number
  msg: string
  store: string
  listen: string
  tracing: string
  webhookConcurrency: number
}

/**
 * Runs `petstore-orders ARGS` on a free port until its start line is logged, then stops it: the
 * line, the port, and everything the process wrote.
 */
async function startLine(args: string[], env: Record<string, string>, cwd?: string): Promise<{ line: StartLine; port: number; output: string }> {
  const port = await freePort()
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd,
    env: { ...process.env, LOG_LEVEL: 'info', PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise((resolve) => child.on('exit', resolve))
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`no start line in 30 s: ${output}`))
    }, 30_000)
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      const found = output.split('\n').find((text) => text.includes('"msg":"started"'))
      if (found !== undefined) {
        clearTimeout(timer)
        resolve(found)
      }
    })
    void exited.then(() => reject(new Error(`exited before its start line: ${output}`)))
  })
  child.kill('SIGTERM')
  await exited
  assert.equal(output.split('\n').filter((text) => text.includes('"msg":"started"')).length, 1, 'one start line')
  return { line: JSON.parse(line) as StartLine, port, output }
}

const scratch = mkdtempSync(join(tmpdir(), 'petstore-start-line-'))
after(() => rmSync(scratch, { recursive: true, force: true }))

forEachStore('serve\'s start line', (kind) => {
  it('names the store, the address, tracing off and the delivery slots', async () => {
    const database = await createDatabase(kind)
    after(() => database.dispose())
    const { line, port } = await startLine(['serve'], { DATABASE_URL: database.url, WEBHOOK_CONCURRENCY: '7' })
    assert.equal(line.level, 30)
    const where = database.config.kind === 'sqlite' ? `sqlite ${database.config.path}` : `postgres ${new URL(database.url).host}${new URL(database.url).pathname}`
    assert.deepEqual(
      { store: line.store, listen: line.listen, tracing: line.tracing, webhookConcurrency: line.webhookConcurrency },
      { store: where, listen: `127.0.0.1:${port}`, tracing: 'off', webhookConcurrency: 7 },
    )
    assert.doesNotMatch(line.store, /@/, 'no user') // the test server's URL names the user postgres
  })
})

describe('serve\'s start line, besides', () => {
  it('names a relative SQLite path in full, and the default delivery slots', async () => {
    const cwd = mkdtempSync(join(scratch, 'cwd-'))
    const { line } = await startLine(['serve'], { DATABASE_URL: 'sqlite:orders.db' }, cwd)
    assert.equal(line.store, `sqlite ${join(cwd, 'orders.db')}`)
    assert.equal(line.webhookConcurrency, 100)
  })

  it('names tracing by its protocol and the full endpoint, without the collector\'s user, password or query', async () => {
    // Nothing is sent to the collector before the line: none needs to answer.
    const database = await createDatabase('sqlite')
    after(() => database.dispose())
    const { line, output } = await startLine(['serve'], {
      DATABASE_URL: database.url,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-user:collector-s3cret@127.0.0.1:1/otlp?api-key=key-s3cret',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TIMEOUT: '100',
    })
    assert.equal(line.tracing, 'http/json to http://127.0.0.1:1/otlp')
    assert.doesNotMatch(output, /s3cret|otel-user/)
    const traces = await startLine(['serve'], { DATABASE_URL: database.url, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://otel.example:4318/custom/traces' })
    assert.equal(traces.line.tracing, 'http/protobuf to https://otel.example:4318/custom/traces')
    const defaults = await startLine(['serve'], { DATABASE_URL: database.url, OTEL_TRACES_EXPORTER: 'otlp' })
    assert.equal(defaults.line.tracing, 'http/protobuf to http://localhost:4318/v1/traces')
  })

  it('is shown in docs/production.md with the fields the real line has, in its order', async () => {
    const doc = readFileSync(new URL('../docs/production.md', import.meta.url), 'utf8')
    const sample = /```ndjson\n(\{[^\n]*"msg":"started"\})\n```/.exec(doc)?.[1]
    assert.ok(sample !== undefined, 'no start line in docs/production.md')
    const database = await createDatabase('sqlite')
    after(() => database.dispose())
    const { line } = await startLine(['serve'], { DATABASE_URL: database.url })
    const shown = JSON.parse(sample) as Record<string, unknown>
    assert.deepEqual(Object.keys(shown), Object.keys(line))
    for (const key of Object.keys(line)) assert.equal(typeof shown[key], typeof line[key as keyof StartLine], key)
  })

  it('is logged by serve --demo too', async () => {
    const cwd = mkdtempSync(join(scratch, 'demo-'))
    const { line, port, output } = await startLine(['serve', '--demo'], { DATABASE_URL: 'sqlite:demo.db' }, cwd)
    assert.equal(line.store, `sqlite ${join(cwd, 'demo.db')}`)
    assert.equal(line.listen, `127.0.0.1:${port}`)
    assert.match(output, /Petstore Orders \(demo\) is listening/)
  })
})
