/**
 * `npm start` builds only what changed: its build step (before `&& node`) is run in a copy of the
 * sources, from no dist (a fresh clone after `npm ci`), again with nothing changed, and after an edit.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

test('npm start builds dist when it is missing, and skips the build when no source changed', async () => {
  const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts
  const build = /^(.*?) && node bin\/petstore-orders\.js serve --demo$/.exec(scripts.start!)?.[1]
  assert.ok(build !== undefined, `unexpected start script: ${scripts.start}`)
  const dir = mkdtempSync(join(tmpdir(), 'petstore-start-'))
  try {
    for (const name of ['src', 'package.json', 'tsconfig.json']) cpSync(join(ROOT, name), join(dir, name), { recursive: true })
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir')
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
