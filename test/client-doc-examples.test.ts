import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { after, before, describe, it } from 'node:test'
import { startTestServer, type TestServer } from './support/harness.js'

// docs/client.md says to run an example with `node example.mts`: its v1 example and its updateOrder
// example are run so, in a directory of its own whose node_modules is this repository's (as a project
// that installed the client), against a server holding the walk-through's orders; what each prints is
// what its comments say.
const DOC = readFileSync(new URL('../docs/client.md', import.meta.url), 'utf8')
const NODE_MODULES = fileURLToPath(new URL('../node_modules', import.meta.url))

/** The first ```ts block after `heading`. */
function example(heading: string): string {
  const section = DOC.slice(DOC.indexOf(`\n${heading}\n`))
  const block = /```ts\n([\s\S]*?)```/.exec(section)
  assert.ok(block !== null, `no TypeScript example under ${heading} in docs/client.md`)
  return block[1]!
}

/** What each `console.log(…)` of the example prints, as its next comment line says. */
function printedAsCommented(code: string): string[] {
  const lines = code.split('\n')
  return lines.flatMap((line, i) => (/^\s*console\.log\(/.test(line) && /^\s*\/\/ /.test(lines[i + 1] ?? '') ? [lines[i + 1]!.replace(/^\s*\/\/ /, '')] : []))
}

/** The arguments of `node` that docs/client.md gives for this Node (its first command, or on 22.14–22.17 its second). */
function documentedNodeArgs(): string[] {
  const section = DOC.slice(DOC.indexOf('\n## Running the examples\n'))
  const block = /```sh\n([\s\S]*?)```/.exec(section)
  assert.ok(block !== null, 'docs/client.md says how to run an example')
  const commands = block[1]!.trim().split('\n').map((line) => line.replace(/#.*$/, '').trim())
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number]
  const command = commands[major === 22 && minor < 18 ? 1 : 0]!
  const match = /^PETSTORE_API_KEY=\S+ node (.*)$/.exec(command)
  assert.ok(match !== null, `not a node command: ${command}`)
  return match[1]!.split(/\s+/)
}

/** A server holding the walk-through's walk.ndjson, as `orders import` stores it. */
async function walkThroughServer(): Promise<TestServer> {
  const server = await startTestServer('sqlite')
  await server.importOrders([
    { id: 9223372036854775807n, petId: 198772n, quantity: 2, shipDate: '2026-12-01T09:00:00.000Z', status: 'pending' },
    { id: 9223372036854775806n, petId: 198772n, quantity: 1, status: 'shipped', complete: true },
  ])
  return server
}

describe('docs/client.md: the examples run with `node example.mts`', () => {
  let server: TestServer
  let dir: string

  before(async () => {
    server = await walkThroughServer()
    dir = mkdtempSync(join(tmpdir(), 'petstore-client-doc-'))
    symlinkSync(NODE_MODULES, join(dir, 'node_modules'))
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('runs the v1 example, which prints what its comments say', async () => {
    const code = example('## v1')
    assert.match(code, /'http:\/\/127\.0\.0\.1:8080\/v1'/)
    writeFileSync(join(dir, 'example.mts'), code.replace("'http://127.0.0.1:8080/v1'", `'${server.origin}/v1'`))
    const key = await server.createKey({ scopes: ['orders:read', 'orders:cancel'] })
    const args = documentedNodeArgs()
    assert.equal(args.at(-1), 'example.mts')
    const { stdout } = await promisify(execFile)(process.execPath, args, {
      cwd: dir,
      env: { ...process.env, PETSTORE_API_KEY: key, NODE_OPTIONS: '' },
    })
    const expected = printedAsCommented(code)
    assert.equal(expected.length, 2, 'two outputs commented in the example')
    // console.log breaks a long object over lines: compared with its spaces folded.
    assert.equal(stdout.replace(/\s+/g, ' ').trim(), expected.join(' '))
  })

  /**
   * Runs the first v2 example under `heading` as `node` does, against `server` with a key of
   * orders:read and orders:write; checks it printed what its comments say (`outputs` of them).
   */
  async function runV2Example(server: TestServer, heading: string, file: string, outputs: number): Promise<void> {
    const code = example(heading)
    assert.match(code, /'http:\/\/127\.0\.0\.1:8080\/v2'/)
    writeFileSync(join(dir, file), code.replace("'http://127.0.0.1:8080/v2'", `'${server.origin}/v2'`))
    const key = await server.createKey({ scopes: ['orders:read', 'orders:write'] })
    const { stdout } = await promisify(execFile)(process.execPath, [...documentedNodeArgs().slice(0, -1), file], {
      cwd: dir,
      env: { ...process.env, PETSTORE_API_KEY: key, NODE_OPTIONS: '' },
    })
    const expected = printedAsCommented(code)
    assert.equal(expected.length, outputs, `${outputs} outputs commented in the example`)
    assert.equal(stdout.replace(/\s+/g, ' ').trim(), expected.join(' '))
  }

  it('runs the placeOrder example against 1,000 orders as the demo holds: placed, shipped, completed, a reused key refused', async () => {
    const demo = await startTestServer('sqlite')
    await demo.importOrders(Array.from({ length: 1000 }, (_, i) => ({ id: BigInt(i + 1), petId: 7n, quantity: 1 })))
    await runV2Example(demo, '### Placing, shipping and completing orders (beta)', 'place-example.mts', 2)
    const order = await demo.store.orders.find(1001n)
    assert.deepEqual([order?.status, order?.complete, order?.metadata], ['shipped', true, { cart: 'c-88' }])
  })

  it('runs the updateOrder example: a change with ifMatch, a 412 handled, a metadata key removed', async () => {
    // Its own server: the v1 example cancels the order this one changes.
    const walk = await walkThroughServer()
    await runV2Example(walk, '### Changing an order (beta)', 'update-example.mts', 5)
    const order = await walk.store.orders.find(9223372036854775807n)
    assert.deepEqual([order?.quantity, order?.metadata, order?.version], [3, { customer: 'c-1042' }, 3])
  })
})
