import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { pbkdf2 } from 'node:crypto'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { BatchedDestination } from '../src/log-destination.js'
import { within } from './support/harness.js'

/** Resolves once everything logged so far has been written (flushSync could race a write in flight). */
function flushed(destination: BatchedDestination): Promise<void> {
  return new Promise((resolve, reject) => destination.flush((error) => (error ? reject(error) : resolve())))
}

describe('BatchedDestination', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-log-'))
  after(() => rmSync(dir, { recursive: true, force: true }))
  let files = 0

  function open(): { destination: BatchedDestination; text: () => string; close: () => void } {
    const path = join(dir, `${files++}.log`)
    const fd = openSync(path, 'w')
    return { destination: new BatchedDestination(fd), text: () => readFileSync(path, 'utf8'), close: () => closeSync(fd) }
  }

  it('holds a few lines back, then writes them in order within 250 ms', async () => {
    const { destination, text, close } = open()
    const logger = pino({ base: undefined }, destination)
    logger.info('one')
    logger.info('two')
    await new Promise((resolve) => setTimeout(resolve, 20))
    assert.equal(text(), '', 'two short lines are not written at once')
    await within(1000, 'the batch', () => text().split('\n').length === 3)
    assert.deepEqual(text().trim().split('\n').map((line) => (JSON.parse(line) as { msg: string }).msg), ['one', 'two'])
    close()
  })

  it('writes a full batch at once, every line whole and in order', async () => {
    const { destination, text, close } = open()
    const logger = pino({ base: undefined }, destination)
    for (let i = 0; i < 1000; i++) logger.info({ i }, 'x'.repeat(100))
    // 1,000 lines of ~150 bytes fill nine batches of up to 16 KiB: written before the 250 ms timer.
    await within(200, 'the full batches', () => text().length >= 8 * 15 * 1024)
    await flushed(destination)
    const numbers = text().trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i)
    assert.deepEqual(numbers, Array.from({ length: 1000 }, (_, i) => i))
    close()
  })

  it('writes lines of any size and script whole: multi-byte characters, and a line longer than a batch', async () => {
    const { destination, text, close } = open()
    const logger = pino({ base: undefined }, destination)
    const messages = ['ünïcødé ✓ 🐾', 'x'.repeat(40_000), '中文'.repeat(3000), 'short']
    for (const msg of messages) logger.info(msg)
    await flushed(destination)
    assert.deepEqual(text().trim().split('\n').map((line) => (JSON.parse(line) as { msg: string }).msg), messages)
    close()
  })

  it('flush(cb) calls back once what was logged has been written', async () => {
    const { destination, text, close } = open()
    pino({ base: undefined }, destination).info('flushed')
    await flushed(destination)
    assert.match(text(), /"msg":"flushed"/)
    close()
  })

  it('flushSync() has written every line when it returns, whatever the thread pool is doing', async () => {
    const { destination, text, close } = open()
    const logger = pino({ base: undefined }, destination)
    // Every thread of libuv's pool busy for a while: an asynchronous write would wait behind them
    // (as it never gets done when the process is exiting).
    const busy = Array.from({ length: 8 }, () => new Promise((resolve) => pbkdf2('x', 'y', 200_000, 64, 'sha512', resolve)))
    // Less than a batch: nothing is being written yet (a batch in the middle of an asynchronous
    // write is left to it, and could land just after).
    for (let i = 0; i < 50; i++) logger.info({ i }, 'x'.repeat(100))
    destination.flushSync()
    const written = text()
    await Promise.all(busy)
    const numbers = written.trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i)
    assert.deepEqual(numbers, Array.from({ length: 50 }, (_, i) => i))
    close()
  })

  it('reports lines it cannot write: to flush(cb), and on stderr at exit', async () => {
    const path = join(dir, `${files++}.log`)
    closeSync(openSync(path, 'w'))
    const fd = openSync(path, 'r') // writing to it fails with EBADF
    const destination = new BatchedDestination(fd, 'test')
    pino({ base: undefined }, destination).info('lost')
    const error = await Promise.race([
      new Promise<Error | undefined>((resolve) => destination.flush(resolve)),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('flush did not call back within 5 s')), 5000).unref()),
    ])
    assert.match(String(error?.message), /^\d+ bytes of log lines lost: EBADF/)
    closeSync(fd)

    const module = new URL('../src/log-destination.ts', import.meta.url).href
    const script = `
      import { openSync } from 'node:fs'
      import pino from 'pino'
      import { BatchedDestination } from '${module}'
      const logger = pino({ base: undefined }, new BatchedDestination(openSync(${JSON.stringify(path)}, 'r'), 'petstore-orders'))
      logger.info('lost at exit')`
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 })
    assert.equal(child.status, 0)
    assert.match(child.stderr, /^petstore-orders: \d+ bytes of log lines lost: EBADF[^\n]*\n$/)
  })

  it('waits out a full pipe whose reader is slow: every line, in order, also at exit', async () => {
    const module = new URL('../src/log-destination.ts', import.meta.url).href
    for (const ending of ['', 'process.exit(0)']) {
      const script = `
        import pino from 'pino'
        import { BatchedDestination } from '${module}'
        process.stdout // Node opens the pipe as a stream: its file descriptor is non-blocking from here on
        const logger = pino({ base: undefined }, new BatchedDestination(1, 'test'))
        for (let i = 0; i < 10000; i++) logger.info({ i }, 'x'.repeat(200)) // 2.5 MB, a pipe holds 64 KiB
        process.stderr.write('logged\\n')
        ${ending}`
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] })
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

  it('writes the lines it holds when the process exits, an uncaught error included', () => {
    const module = new URL('../src/log-destination.ts', import.meta.url).href
    for (const ending of ['process.exit(0)', 'throw new Error("boom")']) {
      const script = `
        import pino from 'pino'
        import { BatchedDestination } from '${module}'
        const logger = pino({ base: undefined }, new BatchedDestination(1))
        for (let i = 0; i < 3; i++) logger.info({ i }, 'before exit')
        ${ending}`
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' })
      const lines = child.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i)
      assert.deepEqual(lines, [0, 1, 2], `${ending}: stdout was ${JSON.stringify(child.stdout)}; stderr ${child.stderr.slice(0, 300)}`)
    }
  })
})
