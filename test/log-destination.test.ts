import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { BatchedDestination } from '../src/log-destination.js'
import { within } from './support/harness.js'

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
    // 1,000 lines of ~150 bytes are nine full batches: written without waiting for the timer.
    await within(200, 'the full batches', () => text().length >= 9 * 16 * 1024)
    destination.flushSync()
    const numbers = text().trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i)
    assert.deepEqual(numbers, Array.from({ length: 1000 }, (_, i) => i))
    close()
  })

  it('flush(cb) calls back once what was logged has been written', async () => {
    const { destination, text, close } = open()
    pino({ base: undefined }, destination).info('flushed')
    await new Promise<void>((resolve, reject) => destination.flush((error) => (error ? reject(error) : resolve())))
    assert.match(text(), /"msg":"flushed"/)
    close()
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
