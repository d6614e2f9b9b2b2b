import { execFileSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './server-process.js'

/**
 * A PostgreSQL server of the test's own, on a private port, that the test can stop and start: the
 * database really going away. Needs the PostgreSQL binaries and root (to run them as `postgres`).
 */
export interface PrivatePostgres {
  url: string
  stop(): void
  start(): void
  destroy(): void
}

function binDir(): string | undefined {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return undefined
  const version = readdirSync(root).sort().at(-1)
  return version === undefined ? undefined : join(root, version, 'bin')
}

/** Undefined when a private server can be run here, else why not. */
export function privatePostgresUnavailable(): string | undefined {
  const bin = binDir()
  if (bin === undefined || !existsSync(join(bin, 'initdb'))) return 'the PostgreSQL server binaries are not installed'
  if (process.getuid?.() !== 0) return 'running a private PostgreSQL server needs root (to run it as the postgres user)'
  return undefined
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = binDir()!
  const dir = mkdtempSync(join(tmpdir(), 'petstore-pg-'))
  chownSync(dir, Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()), -1)
  const port = await freePort()
  const asPostgres = (command: string, args: string[]) =>
    execFileSync('runuser', ['-u', 'postgres', '--', join(bin, command), ...args], { stdio: 'ignore', timeout: 60_000 })
  asPostgres('initdb', ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'])
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`
  const start = () => asPostgres('pg_ctl', ['-D', join(dir, 'data'), '-o', options, '-l', join(dir, 'log'), '-w', 'start'])
  const stop = () => asPostgres('pg_ctl', ['-D', join(dir, 'data'), '-m', 'immediate', '-w', 'stop'])
  start()
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    destroy() {
      try {
        stop()
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
