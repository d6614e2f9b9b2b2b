import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { createDatabase, forEachStore, type TestDatabaseHandle } from './support/harness.js'
import { BIN, freePort } from './support/server-process.js'

interface Line {
  msg: string
  url?: string
  status?: number
  signal?: string
}

/**
 * One run as a new user would try it: `serve` with its stdout on a pipe or in a file, one request,
 * a signal; returns what it wrote and how it ended.
 */
async function serveOneRequest(
  databaseUrl: string,
  stdout: 'pipe' | 'file',
  signal: 'SIGTERM' | 'SIGINT',
  dir: string,
): Promise<{ lines: Line[]; text: string; stderr: string; exit: { code: number | null; signal: string | null } }> {
  const port = await freePort()
  const file = join(dir, `stdout-${port}.log`)
  const fd = stdout === 'file' ? openSync(file, 'w') : undefined
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), LOG_LEVEL: 'info' },
    stdio: ['ignore', fd ?? 'pipe', 'pipe'],
  })
  if (fd !== undefined) closeSync(fd) // the child has its own copy
  let piped = ''
  let stderr = ''
  child.stdout?.on('data', (chunk: Buffer) => (piped += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on('close', (code, sig) => resolve({ code, signal: sig })))
  const origin = `http://127.0.0.1:${port}`
  try {
    const deadline = Date.now() + 15_000
    for (;;) {
      assert.equal(child.exitCode, null, `the server exited at start: ${stderr}`)
      if (await fetch(`${origin}/healthz`).then((r) => r.ok, () => false)) break
      assert.ok(Date.now() < deadline, `the server did not start in 15 s: ${stderr}`)
      await sleep(20)
    }
    const response = await fetch(`${origin}/v1/store/orders`)
    await response.arrayBuffer()
    child.kill(signal)
    const exit = await Promise.race([exited, sleep(15_000).then(() => assert.fail(`no exit within 15 s of ${signal}`))])
    const text = stdout === 'file' ? readFileSync(file, 'utf8') : piped
    const lines = text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Line)
    return { lines, text, stderr, exit }
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
}

forEachStore('a clean stop writes every log line', (kind) => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-stop-'))
  const databases: TestDatabaseHandle[] = []
  let shared: TestDatabaseHandle | undefined
  before(async () => {
    if (kind === 'postgres') databases.push((shared = await createDatabase(kind)))
  })
  after(async () => {
    for (const database of databases) await database.dispose()
    rmSync(dir, { recursive: true, force: true })
  })

  // The lines were lost in some runs only (the last batch was handed to an asynchronous write as
  // the process exited): a loop of real processes, alternating pipe and file, SIGTERM and SIGINT.
  const RUNS = 12
  it(`loses no line in ${RUNS} runs: start, one request, a signal (stdout on a pipe and in a file)`, { timeout: 240_000 }, async () => {
    const failures: string[] = []
    for (let run = 0; run < RUNS; run++) {
      const stdout = run % 2 === 0 ? 'pipe' : 'file'
      const signal = run % 4 < 2 ? 'SIGTERM' : 'SIGINT'
      let database = shared
      if (database === undefined) databases.push((database = await createDatabase(kind))) // a fresh SQLite file each run
      // An empty file, an empty database: serve does not create it, so says nothing on stderr about it.
      if (database.config.kind === 'sqlite') writeFileSync(database.config.path, '')
      const { lines, text, stderr, exit } = await serveOneRequest(database.url, stdout, signal, dir)
      const access = lines.some((line) => line.msg === 'request' && line.url === '/v1/store/orders' && line.status === 401)
      const shuttingDown = lines.some((line) => line.msg === 'shutting down' && line.signal === signal)
      const last = lines.at(-1)?.msg
      if (!access || !shuttingDown || last !== 'stopped' || exit.code !== 0 || exit.signal !== null || stderr !== '') {
        failures.push(
          `run ${run + 1} (${stdout}, ${signal}): access line ${access}, "shutting down" ${shuttingDown}, last line ${JSON.stringify(last)}, ` +
            `exit ${JSON.stringify(exit)}, stderr ${JSON.stringify(stderr.slice(0, 300))}, stdout ${JSON.stringify(text.slice(-400))}`,
        )
      }
    }
    assert.deepEqual(failures, [], `${failures.length} of ${RUNS} runs lost lines or failed:\n${failures.join('\n')}`)
  })
})
