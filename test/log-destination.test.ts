import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { logDestination } from '../src/server.js'
import { within } from './support/harness.js'

const server = new URL('../src/server.ts', import.meta.url).href

/** Runs `body` in a new node process with `logger` logging to the server's destination on stdout. */
function script(body: string): string[] {
  const source = `
    import pino from 'pino'
    import { logDestination } from '${server}'
    const logger = pino({ base: undefined }, logDestination(1))
    ${body}`
  return ['--import', 'tsx', '--input-type=module', '-e', source]
}

describe("the server's log destination", () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-log-'))
  after(() => rmSync(dir, { recursive: true, force: true }))
  let files = 0

  // The destination owns its descriptor, which stays open: closing it under a live destination
  // would fail that destination's next flush, and its number may meanwhile be another test's file.
  function open(): { logger: pino.Logger; destination: ReturnType<typeof logDestination>; text: () => string } {
    const path = join(dir, `${files++}.log`)
    const destination = logDestination(openSync(path, 'w'))
    return { logger: pino({ base: undefined }, destination), destination, text: () => readFileSync(path, 'utf8') }
  }

  it('holds a few lines back, then writes them in order at the periodic flush (250 ms)', async (t) => {
    // The flush's interval timer is mocked: the test moves its clock, so a loaded machine cannot
    // make the flush come before the check that nothing was written yet.
    t.mock.timers.enable({ apis: ['setInterval'] })
    const { logger, text } = open()
    logger.info('one')
    logger.info('two')
    await new Promise((resolve) => setTimeout(resolve, 20))
    t.mock.timers.tick(249)
    assert.equal(text(), '', 'two short lines are not written before the flush is due')
    t.mock.timers.tick(1)
    await within(10_000, 'the periodic flush', () => text().split('\n').length === 3)
    assert.deepEqual(text().trim().split('\n').map((line) => (JSON.parse(line) as { msg: string }).msg), ['one', 'two'])
  })

  it('writes lines of any size and script whole and in order; flush(cb) calls back once they are written', async () => {
    const { logger, destination, text } = open()
    const messages = ['ünïcødé ✓ 🐾', 'x'.repeat(40_000), '中文'.repeat(3000), ...Array.from({ length: 1000 }, (_, i) => `${i}`)]
    for (const msg of messages) logger.info(msg)
    await new Promise<void>((resolve, reject) => destination.flush((error) => (error ? reject(error) : resolve())))
    assert.deepEqual(text().trim().split('\n').map((line) => (JSON.parse(line) as { msg: string }).msg), messages)
  })

  it('writes the lines it holds when the process exits, an uncaught error included', () => {
    for (const ending of ['', 'process.exit(0)', 'throw new Error("boom")']) {
      const child = spawnSync(process.execPath, script(`for (let i = 0; i < 3; i++) logger.info({ i }, 'before exit')\n${ending}`), { encoding: 'utf8' })
      const lines = child.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i)
      assert.deepEqual(lines, [0, 1, 2], `${ending}: stdout was ${JSON.stringify(child.stdout)}; stderr ${child.stderr.slice(0, 300)}`)
    }
  })

  it('waits out a full pipe whose reader is slow: every line, in order, also at exit', async () => {
    for (const ending of ['', 'process.exit(0)']) {
      const body = `
        for (let i = 0; i < 10000; i++) logger.info({ i }, 'x'.repeat(200)) // 2.5 MB, a pipe holds 64 KiB
        process.stderr.write('logged\\n')
        ${ending}`
      const child = spawn(process.execPath, script(body), { stdio: ['ignore', 'pipe', 'pipe'] })
      child.stdout.pause()
      let stdout = ''
      let stderr = ''
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      const closed = new Promise<number | null>((resolve) => child.on('close', resolve))
      await within(20_000, 'the lines logged', () => stderr === 'logged\n', 20)
      await new Promise((resolve) => setTimeout(resolve, 300)) // the child meets a full pipe: nothing is read yet
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
      child.stdout.resume()
      const code = await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 30_000, 'no exit within 30 s').unref())])
      if (child.exitCode === null) child.kill('SIGKILL')
      assert.equal(code, 0, stderr)
      assert.equal(stderr, 'logged\n')
      const numbers = stdout.trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i)
      assert.deepEqual(numbers, Array.from({ length: 10000 }, (_, i) => i), `ending ${JSON.stringify(ending)}`)
    }
  })

  it('stops logging at a write that fails, says so on stderr, and keeps the process running', () => {
    const path = join(dir, `${files++}.log`)
    closeSync(openSync(path, 'w'))
    // The first flush fails; what is logged and flushed after it is dropped, without an error.
    const source = `
      import { openSync } from 'node:fs'
      import pino from 'pino'
      import { logDestination } from '${server}'
      const destination = logDestination(openSync(${JSON.stringify(path)}, 'r')) // writing to it fails with EBADF
      const logger = pino({ base: undefined }, destination)
      logger.info('lost')
      destination.flush((error) => {
        process.stdout.write(\`flush: \${error?.code}\\n\`)
        logger.info('x'.repeat(5000)) // more than the 4 KiB held back: a destination still writing would write it at once
        destination.flush((error) => process.stdout.write(\`flush after: \${error?.code ?? 'no error'}\\n\`))
      })
      setTimeout(() => process.stdout.write('still running\\n'), 1000) // four flushes later`
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], { encoding: 'utf8', timeout: 30_000 })
    assert.equal(child.status, 0, child.stderr)
    assert.match(child.stderr, /^petstore-orders: log lines could not be written, logging stopped: EBADF[^\n]*\n$/)
    assert.equal(child.stdout, 'flush: EBADF\nflush after: no error\nstill running\n')
    assert.equal(readFileSync(path, 'utf8'), '')
  })
})
