/**
 * The README's first example, run as written (with curl, through a shell) against a demo server:
 * what a new user types first must answer what the README says.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { assertOk, cli } from './support/cli.js'
import { startDemo } from './support/demo.js'

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
const hasCurl = spawnSync('curl', ['--version']).status === 0

/** The block that starts with `KEY=pso_…`: each curl line with the `# ` lines after it. */
function firstExample(): { command: string; expected: string[] }[] {
  const block = /```sh\n(KEY=pso_…[^\n]*\n[\s\S]*?)```/.exec(README)?.[1]
  assert.ok(block !== undefined, 'no example starting with KEY=pso_… in README.md')
  const steps: { command: string; expected: string[] }[] = []
  for (const line of block.split('\n')) {
    if (line.startsWith('curl ')) steps.push({ command: line, expected: [] })
    else if (line.startsWith('# ')) steps.at(-1)?.expected.push(line.slice(2))
  }
  return steps
}

/**
 * The README block `block` matches (its first group): each command, its `\\` continuations joined,
 * with the `# ` lines after it.
 */
function exampleSteps(block: RegExp, what: string): { command: string; expected: string[] }[] {
  const text = block.exec(README)?.[1]
  assert.ok(text !== undefined, `no ${what} in README.md`)
  const steps: { command: string; expected: string[] }[] = []
  for (const line of text.replaceAll('\\\n', ' ').split('\n')) {
    if (line.startsWith('curl ')) steps.push({ command: line, expected: [] })
    else if (line.startsWith('# ')) steps.at(-1)?.expected.push(line.slice(2))
  }
  return steps
}

/** The block that places an order: its first line is `curl -i` with an `Idempotency-Key`. */
const placeOrderExample = (): { command: string; expected: string[] }[] =>
  exampleSteps(/```sh\n(curl -i [^\n]*\\\n[^`]*?Idempotency-Key[\s\S]*?)```/, 'placeOrder example with an Idempotency-Key')

/** The block that changes an order: a placeOrder with metadata, then `curl -i -X PATCH`. */
const updateOrderExample = (): { command: string; expected: string[] }[] =>
  exampleSteps(/```sh\n(curl [^\n]*\\\n[^`]*?"metadata"[^`]*?-X PATCH[\s\S]*?)```/, 'updateOrder example')

/**
 * What `curl -i` answered against the README's two `# ` lines: `<status line> … <header>`, then the
 * body. The status line, and each header shown among the others (its name in any case).
 */
function assertHeadAndBody(command: string, expected: string[], stdout: string): void {
  assert.equal(expected.length, 2, `a head and a body after ${command}`)
  const [head, body] = stdout.split('\r\n\r\n') as [string, string]
  const [status, ...headers] = expected[0]!.split(' … ')
  const lines = head.split('\r\n')
  assert.equal(lines[0], status, `${command}\n  answered: ${head}`)
  for (const header of headers) {
    const [name, value] = header.split(/: (.*)/) as [string, string]
    assert.ok(lines.some((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}: `) && line.slice(name.length + 2) === value), `${header}\n  answered: ${head}`)
  }
  assert.match(body, pattern(expected[1]!), `${command}\n  answered: ${body}`)
}

/**
 * The README's reads of v2 shown with their answer: each `curl` GET of a /v2 URL (no -X, no -d) in
 * a shell block, with the `# ` line after it.
 */
function v2ReadExamples(): { command: string; expected: string }[] {
  const steps: { command: string; expected: string }[] = []
  for (const [, block] of README.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const lines = block!.split('\n')
    lines.forEach((line, i) => {
      const next = lines[i + 1] ?? ''
      if (/^curl -H "Authorization: Bearer \$KEY" '[^']*\/v2\/[^']*'$/.test(line) && next.startsWith('# ')) steps.push({ command: line, expected: next.slice(2) })
    })
  }
  return steps
}

/** `…` in the README stands for any text. */
function pattern(expected: string): RegExp {
  return new RegExp(`^${expected.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*')}$`)
}

test("the README's first curl example answers as the README says, on the demo data", { skip: hasCurl ? false : 'curl is not installed' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-readme-'))
  const demo = await startDemo({ DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }, dir)
  try {
    const origin = new URL(demo.url).origin
    const steps = firstExample()
    assert.ok(steps.length >= 3 && steps.some((step) => step.command.includes('-X DELETE')), 'the example lost its cancel')
    for (const { command, expected } of steps) {
      assert.equal(expected.length, 1, `one answer after ${command}`)
      const run = spawnSync('bash', ['-c', command.replaceAll('http://127.0.0.1:8080', origin)], {
        env: { ...process.env, KEY: demo.key },
        encoding: 'utf8',
        timeout: 30_000,
      })
      assert.equal(run.status, 0, run.stderr)
      // With -i only the status line is shown in the README.
      const answer = command.includes(' -i ') ? run.stdout.split('\r\n')[0]! : run.stdout.trim()
      assert.match(answer, pattern(expected[0]!), `${command}\n  answered: ${answer.slice(0, 300)}`)
    }
    assert.equal(await demo.stop(), 0)

    // Then seeding more, as the README's Operator CLI says: the demo ids are taken (one cancelled
    // just now), so a plain seed is refused, naming --first-id; the README's line works.
    const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }
    const plain = await cli(['seed', '--orders', '1000'], env)
    assert.equal(plain.code, 1)
    assert.match(plain.stderr, /use --first-id/)
    const line = /`(seed --orders \d+ --first-id \d+)`/.exec(README)?.[1]
    assert.ok(line !== undefined, 'the README names no seed --first-id example')
    const seeded = await cli(line.split(' '), env)
    assertOk(seeded)
    assert.match(seeded.stdout, /^seeded 1000 orders \(ids 1001 to 2000\)/)
  } finally {
    await demo.stop()
    rmSync(dir, { recursive: true, force: true })
  }
})

test("the README's placeOrder example answers as the README says, with nothing but curl and node on the PATH", { skip: hasCurl ? false : 'curl is not installed' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-readme-place-'))
  const demo = await startDemo({ DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }, dir)
  try {
    // What a new user's machine surely has: curl, as the README's examples use it, and node, as
    // `npm start` needs it. No uuidgen, nor any other helper.
    const bin = join(dir, 'bin')
    mkdirSync(bin)
    const curl = spawnSync('bash', ['-c', 'command -v curl'], { encoding: 'utf8' }).stdout.trim()
    symlinkSync(curl, join(bin, 'curl'))
    symlinkSync(process.execPath, join(bin, 'node'))
    const origin = new URL(demo.url).origin
    const steps = placeOrderExample()
    assert.ok(steps[0]?.command.includes('Idempotency-Key'), 'the example lost its Idempotency-Key')
    assert.deepEqual(steps.map((step) => /\/v2\/store\/orders\S*/.exec(step.command)?.[0]), ['/v2/store/orders', '/v2/store/orders/1001/ship', '/v2/store/orders/1001/complete'])
    const keys: string[] = []
    for (const { command, expected } of steps) {
      // `bash -x` shows each command as run, with the key it was given.
      const run = spawnSync('/bin/bash', ['-xc', command.replaceAll('http://127.0.0.1:8080', origin)], {
        env: { PATH: bin, KEY: demo.key },
        encoding: 'utf8',
        timeout: 30_000,
      })
      assert.equal(run.status, 0, run.stderr)
      const key = /Idempotency-Key: ([^'"\s]*)/.exec(run.stderr)?.[1]
      if (key !== undefined) keys.push(key)
      if (command.includes(' -i ')) {
        assertHeadAndBody(command, expected, run.stdout)
      } else {
        assert.equal(expected.length, 1, `one answer after ${command}`)
        assert.match(run.stdout.trim(), pattern(expected[0]!), `${command}\n  answered: ${run.stdout.slice(0, 300)}`)
      }
    }
    assert.equal(keys.length, 1)
    assert.match(keys[0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'the Idempotency-Key sent is a fresh UUID')
    assert.equal(await demo.stop(), 0)
  } finally {
    await demo.stop()
    rmSync(dir, { recursive: true, force: true })
  }
})

test("the README's v2 reads (a page of cancelled orders, the event feed) answer as the README shows, on the demo data", { skip: hasCurl ? false : 'curl is not installed' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-readme-v2-'))
  const demo = await startDemo({ DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }, dir)
  try {
    const origin = new URL(demo.url).origin
    const steps = v2ReadExamples()
    assert.deepEqual(steps.map((step) => /\/v2\/[^?']*/.exec(step.command)?.[0]), ['/v2/store/orders', '/v2/store/order-events'])
    for (const { command, expected } of steps) {
      const run = spawnSync('bash', ['-c', command.replaceAll('http://127.0.0.1:8080', origin)], { env: { ...process.env, KEY: demo.key }, encoding: 'utf8', timeout: 30_000 })
      assert.equal(run.status, 0, run.stderr)
      assert.match(run.stdout.trim(), pattern(expected), `${command}\n  answered: ${run.stdout.slice(0, 300)}`)
    }
    assert.equal(await demo.stop(), 0)
  } finally {
    await demo.stop()
    rmSync(dir, { recursive: true, force: true })
  }
})

test("the README's updateOrder example (metadata, If-Match, a 412, the metadata filter) answers as the README says", { skip: hasCurl ? false : 'curl is not installed' }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-readme-update-'))
  const demo = await startDemo({ DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }, dir)
  try {
    const origin = new URL(demo.url).origin
    const steps = updateOrderExample()
    assert.deepEqual(
      steps.map((step) => [/-X [A-Z]+/.exec(step.command)?.[0] ?? (step.command.includes(' -d ') ? 'POST' : 'GET'), /If-Match: "\d+"/.exec(step.command)?.[0] ?? null]),
      [['POST', null], ['-X PATCH', 'If-Match: "1"'], ['-X PATCH', 'If-Match: "1"'], ['GET', null]],
      'the example lost a step',
    )
    for (const { command, expected } of steps) {
      const run = spawnSync('bash', ['-c', command.replaceAll('http://127.0.0.1:8080', origin)], { env: { ...process.env, KEY: demo.key }, encoding: 'utf8', timeout: 30_000 })
      assert.equal(run.status, 0, run.stderr)
      if (command.includes(' -i ')) {
        assertHeadAndBody(command, expected, run.stdout)
      } else {
        assert.equal(expected.length, 1, `one answer after ${command}`)
        assert.match(run.stdout.trim(), pattern(expected[0]!), `${command}\n  answered: ${run.stdout.slice(0, 300)}`)
      }
    }
    assert.equal(await demo.stop(), 0)
  } finally {
    await demo.stop()
    rmSync(dir, { recursive: true, force: true })
  }
})
