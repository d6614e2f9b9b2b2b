/**
 * `npm start` builds only what changed: its build step (before `&& exec node`) is run in a copy of
 * the sources, from no dist (a fresh clone after `npm ci`), again with nothing changed, and after an
 * edit. And it stops as a person stops it: SIGTERM to npm, or Ctrl-C at a terminal, leaves no
 * process behind and the port free.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { appendFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, test } from 'node:test'
import { freePort } from './support/server-process.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

/** A copy of what `npm start` reads (sources, package.json, tsconfig.json, bin), sharing node_modules. */
function copyOfTheProject(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  for (const name of ['src', 'bin', 'package.json', 'tsconfig.json']) cpSync(join(ROOT, name), join(dir, name), { recursive: true })
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir')
  return dir
}

test('npm start builds dist when it is missing, and skips the build when no source changed', async () => {
  const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts
  const build = /^(.*?) && exec node bin\/petstore-orders\.js serve --demo$/.exec(scripts.start!)?.[1]
  assert.ok(build !== undefined, `unexpected start script: ${scripts.start}`)
  const dir = copyOfTheProject('petstore-start-')
  try {
    const run = (): void => {
      const result = spawnSync('sh', ['-c', build], {
        cwd: dir,
        env: { ...process.env, PATH: `${join(ROOT, 'node_modules', '.bin')}:${process.env.PATH}` },
        encoding: 'utf8',
        timeout: 240_000,
      })
      assert.equal(result.status, 0, `${build}: ${result.stdout}${result.stderr}`)
    }
    const output = join(dir, 'dist', 'cli', 'progress.js')
    const mtime = (): number => statSync(output).mtimeMs

    run() // a fresh clone: no dist yet
    assert.ok(existsSync(join(dir, 'dist', 'cli', 'main.js')))
    const past = new Date(Date.now() - 60_000) // a build written a minute ago
    utimesSync(output, past, past)
    const built = mtime()

    run() // nothing changed: nothing written
    assert.equal(mtime(), built, 'the build ran again with no source changed')

    appendFileSync(join(dir, 'src', 'cli', 'progress.ts'), '\n// edited\n') // an edit: built again
    run()
    assert.match(readFileSync(join(dir, 'dist', 'cli', 'progress.js'), 'utf8'), /\/\/ edited/, 'an edited source was not built')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

/** The live processes of a process group, as `pid command`, from /proc. */
function processesOfGroup(group: number): string[] {
  const found: string[] = []
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let stat: string
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8') // pid (comm) state ppid pgrp …
    } catch {
      continue // it ended while the list was read
    }
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (Number(pgrp) === group && state !== 'Z') found.push(`${pid} ${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))}`)
  }
  return found
}

/** Whether a new listener can take `port` on 127.0.0.1, as the server's would. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer()
    probe.once('error', () => resolve(false))
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)))
  })
}

describe('stopping npm start', () => {
  let dir: string

  before(() => {
    dir = copyOfTheProject('petstore-start-stop-')
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  /**
   * `npm start` in a process group of its own, as a terminal runs a command, on a free port; resolves
   * once the demo says it is listening, with the processes of the group then.
   */
  async function npmStart(): Promise<{ group: number; port: number; running: string[]; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>; output: () => string }> {
    const port = await freePort()
    const npm = spawn('npm', ['start'], {
      cwd: dir,
      detached: true, // its own process group (and session), whose id is npm's pid
      env: { ...process.env, PORT: String(port), DATABASE_URL: `sqlite:${join(dir, 'data', `petstore-${port}.db`)}`, LOG_LEVEL: 'warn', npm_config_update_notifier: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    npm.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    npm.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.on('exit', (code, signal) => resolve({ code, signal })))
    await new Promise<void>((resolve, reject) => {
      npm.stdout.on('data', () => {
        if (output.includes(`is listening on http://127.0.0.1:${port}/v1\n`)) resolve()
      })
      void exited.then(({ code, signal }) => reject(new Error(`npm start ended (${code ?? signal}) before listening: ${output}`)))
    })
    return { group: npm.pid!, port, running: processesOfGroup(npm.pid!), exited, output: () => output }
  }

  for (const [how, stop] of [
    ['SIGTERM to npm', (group: number) => process.kill(group, 'SIGTERM')],
    ['SIGINT to its process group, as Ctrl-C at a terminal sends it', (group: number) => process.kill(-group, 'SIGINT')],
  ] as const) {
    test(`${how} stops the server: no process of it is left, and its port is free`, { timeout: 240_000 }, async () => {
      const started = await npmStart()
      try {
        // The server's name in /proc: node, MainThread on Node 24, which names its main thread, or node-MainThread on 26.
        assert.ok(started.running.some((line) => / (node|MainThread|node-MainThread)$/.test(line)), `no server in npm's group: ${started.running.join(', ')}`)
        assert.equal(await portIsFree(started.port), false, 'the server does not hold its port')
        stop(started.group)
        const { code } = await started.exited
        // npm forwards SIGTERM to the server alone, which stops gracefully (exit 0, and so npm). A
        // Ctrl-C reaches the server twice, from the terminal and forwarded by npm: its exit status
        // depends on which comes first, so only what it leaves behind is asserted.
        if (how.startsWith('SIGTERM')) assert.equal(code, 0, started.output())
        assert.deepEqual(processesOfGroup(started.group), [], `left running after npm ended:\n${started.output()}`)
        assert.equal(await portIsFree(started.port), true, 'the port is still held')
      } finally {
        try {
          process.kill(-started.group, 'SIGKILL') // whatever a failed run left
        } catch {
          // none left
        }
      }
    })
  }
})
