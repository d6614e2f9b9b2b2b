import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'

export const BIN = fileURLToPath(new URL('../../bin/petstore-orders.js', import.meta.url))

export interface ServerProcess {
  child: ChildProcess
  origin: string
  /** Everything the process wrote, so far. */
  output(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })
}

/** `petstore-orders serve` as a real process on a free port; resolves once /healthz answers. */
export async function spawnServer(databaseUrl: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const port = await freePort()
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  )
  const origin = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 30_000 // a start takes a second or two; a loaded machine may take many more
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited at start: ${output}`)
    try {
      if ((await fetch(`${origin}/healthz`)).ok) break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`the server did not start in 30 s: ${output}`)
    }
    await sleep(50)
  }
  return { child, origin, output: () => output, exited }
}
