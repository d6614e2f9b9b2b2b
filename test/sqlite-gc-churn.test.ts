import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, it } from 'node:test'
import { fileURLToPath } from 'node:url'

// The runtime this suite runs on (CI: Node 24 and 22) with the better-sqlite3 the lock file
// installs must survive garbage-collected statements wherever they are finalized. better-sqlite3 12
// built against Node 24.19's or a later 24.x's headers aborted there, on 24.19–24.21, with
// "Assertion failed: (env) != nullptr" (nodejs/node#65446); this churn aborted 3 of 3 runs so on 24.21.0.
const CHURN = fileURLToPath(new URL('./fixtures/runtime/sqlite-gc-churn.mjs', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'petstore-gc-churn-'))
after(() => rmSync(dir, { recursive: true, force: true }))

it('prepares and drops 56,000 statements on the main thread and in workers, then idles and exits, without an abort', async () => {
  const result = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) => {
    // A small young generation: many more collections for the same work.
    const child = execFile(process.execPath, ['--max-semi-space-size=1', CHURN, join(dir, 'churn.db'), '20000'], { maxBuffer: 16 * 1024 * 1024 }, (_error, stdout, stderr) =>
      resolve({ code: child.exitCode, signal: child.signalCode, stdout, stderr }),
    )
  })
  assert.doesNotMatch(result.stderr, /Assertion failed/, result.stderr)
  assert.deepEqual({ code: result.code, signal: result.signal }, { code: 0, signal: null }, result.stderr)
  assert.match(result.stdout, /^churned 20000 rounds$/m)
})
