import { fork, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { BUILD_DIR } from './paths.js'
import { memoryOf } from './proc.js'

type Message = { type: string } & Record<string, unknown>

const running = new Set<Child>()

/** Kills (SIGKILL) every child still running: on the bench's exit, whatever the reason. */
export function killAllChildren(): void {
  for (const child of running) child.process.kill('SIGKILL')
}

/**
 * A child process of the bench: a server under test, the seeder or the downloader. It runs the
 * compiled JavaScript of a bench/ script under plain node (see bench/tsconfig.build.json), talks over
 * IPC, and has its own /proc entry for memory readings.
 */
export class Child {
  readonly process: ChildProcess
  readonly exited: Promise<number | null>
  private readonly inbox: Message[] = []
  private readonly waiters: { type: string; resolve: (message: Message) => void; reject: (error: Error) => void }[] = []
  private stderr = ''
  private exitCode: number | null | undefined

  /** `script`: path under bench/, e.g. 'lib/project-server.ts'; `build`: another tree's build (lib/reference.ts). */
  constructor(
    readonly name: string,
    script: string,
    options: { env?: Record<string, string>; args?: string[]; nodeOptions?: string[]; build?: string } = {},
  ) {
    const file = join(options.build ?? BUILD_DIR, 'bench', script.replace(/\.ts$/, '.js'))
    this.process = fork(file, options.args ?? [], {
      env: { ...process.env, NODE_OPTIONS: '', ...options.env },
      execArgv: options.nodeOptions ?? [],
      // Servers log every request (pino, at the configured level) to stdout: it is read by nobody,
      // as when a process manager sends it to a file. stderr is kept for error reports.
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      serialization: 'advanced',
    })
    running.add(this)
    this.process.stderr!.setEncoding('utf8').on('data', (text: string) => {
      this.stderr = (this.stderr + text).slice(-8000)
    })
    this.process.on('message', (message: Message) => {
      if (message.type === 'error') {
        this.failWaiters(new Error(`${this.name} failed: ${String(message.message)}`))
        return
      }
      const index = this.waiters.findIndex((waiter) => waiter.type === message.type)
      if (index >= 0) this.waiters.splice(index, 1)[0]!.resolve(message)
      else this.inbox.push(message)
    })
    this.exited = new Promise((resolve) => {
      this.process.on('exit', (code, signal) => {
        running.delete(this)
        this.exitCode = code
        this.failWaiters(new Error(`${this.name} exited (${signal ?? code}) ${this.stderr.trim()}`.trim()))
        resolve(code)
      })
    })
  }

  get pid(): number {
    return this.process.pid!
  }

  /** The next message of this type (already received or to come); fails if the child dies first. */
  next<T extends { type: string }>(type: string, timeoutMs = 120_000): Promise<T> {
    const index = this.inbox.findIndex((message) => message.type === type)
    if (index >= 0) return Promise.resolve(this.inbox.splice(index, 1)[0] as unknown as T)
    if (this.exitCode !== undefined) return Promise.reject(new Error(`${this.name} has exited: ${this.stderr.trim()}`))
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: no "${type}" message within ${timeoutMs} ms`)), timeoutMs)
      this.waiters.push({
        type,
        resolve: (message) => {
          clearTimeout(timer)
          resolve(message as unknown as T)
        },
        reject: (error) => {
          clearTimeout(timer)
          reject(error)
        },
      })
    })
  }

  send(message: Message): void {
    this.process.send(message)
  }

  /** Peak RSS (VmHWM) and current RSS, in bytes: only while the child runs. */
  memory(): { peakRss: number; rss: number } {
    return memoryOf(this.pid)
  }

  /** SIGTERM (graceful), SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.exitCode !== undefined) return
    this.process.kill('SIGTERM')
    const timer = setTimeout(() => this.process.kill('SIGKILL'), graceMs)
    await this.exited
    clearTimeout(timer)
  }

  /** SIGKILL: no chance to flush or close anything. */
  async kill(): Promise<void> {
    if (this.exitCode !== undefined) return
    this.process.kill('SIGKILL')
    await this.exited
  }

  private failWaiters(error: Error): void {
    for (const waiter of this.waiters.splice(0)) waiter.reject(error)
  }
}

/**
 * Environment of every server child that runs the project's HTTP stack, on top of its defaults. The
 * per-key rate limit (RATE_LIMIT_PER_KEY, 1,200 a minute by default) would answer 429 to the bench's
 * single key within a second: it is set to its maximum, so the limiter still counts every request
 * (its cost is measured) but never refuses one.
 */
export const PROJECT_ENV: Record<string, string> = { RATE_LIMIT_PER_KEY: '10000000' }

/** A server child started and listening: its URL, and the Child to read memory from and stop. */
export interface RunningChild {
  child: Child
  url: string
}

export async function startServerChild(
  name: string,
  script: string,
  env: Record<string, string>,
  options: { build?: string; nodeOptions?: string[] } = {},
): Promise<RunningChild> {
  const child = new Child(name, script, { ...options, env: { HOST: '127.0.0.1', PORT: '0', ...env } })
  try {
    const ready = await child.next<{ type: 'ready'; url: string }>('ready', 60_000)
    return { child, url: ready.url }
  } catch (error) {
    await child.kill()
    throw error
  }
}
