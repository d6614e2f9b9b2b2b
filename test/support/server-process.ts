import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
 * A port that is free now, for a process to listen on, and handed to no other caller while this
 * process runs. Not one the kernel hands out itself (port 0, or an outgoing connection's local
 * port): a port freed after probing could be taken by any process's next connection before the
 * server listens, which a busy machine makes often. Below the ephemeral range (ip_local_port_range),
 * only another listener can take it; and a lock file per port keeps two test processes (the runner
 * runs two files at once) from picking the same one, where one would talk to the other's server.
 */
export async function freePort(): Promise<number> {
  mkdirSync(PORT_LOCKS, { recursive: true })
  for (;;) {
    const port = LOWEST_PORT + Math.floor(Math.random() * (EPHEMERAL_START - LOWEST_PORT))
    if (claim(port) && (await canListen(port))) return port
  }
}

const LOWEST_PORT = 10_000
const EPHEMERAL_START = ephemeralStart()
const PORT_LOCKS = join(tmpdir(), 'petstore-orders-test-ports')
const claimed: string[] = []
process.on('exit', () => {
  for (const lock of claimed) rmSync(lock, { force: true })
})

/** Takes the port's lock file, or one left by a process that is gone; false when a live one holds it. */
function claim(port: number): boolean {
  const lock = join(PORT_LOCKS, String(port))
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lock, String(process.pid), { flag: 'wx' })
      claimed.push(lock)
      return true
    } catch {
      if (holderAlive(lock)) return false
      rmSync(lock, { force: true })
    }
  }
  return false
}

function holderAlive(lock: string): boolean {
  try {
    process.kill(Number(readFileSync(lock, 'utf8')), 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' // alive, another user's
  }
}

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
  // A start takes a second or two; a loaded machine (an image build beside the tests) may take much more.
  const deadline = Date.now() + 120_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited at start: ${output}`)
    try {
      if ((await fetch(`${origin}/healthz`)).ok) break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`the server did not start in 120 s: ${output}`)
    }
    await sleep(50)
  }
  return { child, origin, output: () => output, exited }
}

/** Stops a server with SIGTERM, unless it has exited already, and waits until it has. */
export async function stopServer(server: ServerProcess): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGTERM')
  await server.exited
}
