import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
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

/**
 * A port that is free now, for a process to listen on. Not one the kernel hands out itself (port 0,
 * or an outgoing connection's local port): a port freed after probing could be taken by any process's
 * next connection before the server listens, which a busy machine makes often. Below the ephemeral
 * range (ip_local_port_range), only another listener can take it.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = LOWEST_PORT + Math.floor(Math.random() * (EPHEMERAL_START - LOWEST_PORT))
    if (await canListen(port)) return port
  }
}

const LOWEST_PORT = 10_000
const EPHEMERAL_START = ephemeralStart()

function ephemeralStart(): number {
  try {
    const start = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0])
    return Number.isInteger(start) && start > LOWEST_PORT + 1000 ? start : 32_768
  } catch {
    return 32_768 // not Linux: the IANA range starts at 49152, Linux's default at 32768
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer()
    probe.once('error', () => resolve(false))
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)))
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
