/**
 * The README's first example, run as written (with curl, through a shell) against a demo server:
 * what a new user types first must answer what the README says.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
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
