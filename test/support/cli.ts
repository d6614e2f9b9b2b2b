import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { BIN } from './server-process.js'

/** How a run of the CLI ended, and what it printed. */
export interface Result {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs the real binary to its end, stdin closed, stdout and stderr piped; in `cwd` when given. */
export function cli(args: string[], env: Record<string, string | undefined> = {}, cwd?: string): Promise<Result> {
  return run(process.execPath, [BIN, ...args], env, cwd)
}

/**
 * Runs the real binary to its end as `cat INPUT | petstore-orders ARGS` does: its stdin a pipe (a
 * child's stdin from spawn is a socket, which `/dev/stdin` cannot be opened on), stdout and stderr piped.
 */
export function cliFromPipe(args: string[], env: Record<string, string | undefined>, inputFile: string): Promise<Result> {
  return run('sh', ['-c', 'input="$1"; shift; cat "$input" | "$@"', 'sh', inputFile, process.execPath, BIN, ...args], env)
}

/** Runs the real binary to its end with its stdout sent to `outputFile` (`/dev/full`: a full disk). */
export function cliToFile(args: string[], env: Record<string, string | undefined>, outputFile: string): Promise<Result> {
  return run('sh', ['-c', 'output="$1"; shift; "$@" > "$output"', 'sh', outputFile, process.execPath, BIN, ...args], env)
}

function run(command: string, args: string[], env: Record<string, string | undefined>, cwd?: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, PETSTORE_DEBUG: undefined, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** Exactly one line on stderr, `petstore-orders: …`, matching `pattern`; nothing on stdout. */
export function assertOneLineError(result: Result, code: 1 | 2, pattern: RegExp): void {
  assert.equal(result.code, code, `exit status ${result.code}, expected ${code}; stderr: ${result.stderr}`)
  assert.match(result.stderr, /^petstore-orders: [^\n]+\n$/, `not one error line: ${JSON.stringify(result.stderr)}`)
  assert.match(result.stderr.slice(0, -1), pattern)
  assert.equal(result.stdout, '')
}

export function assertOk(result: Result): void {
  assert.equal(result.code, 0, `exit status ${result.code}; stderr: ${result.stderr}; stdout: ${result.stdout}`)
}
