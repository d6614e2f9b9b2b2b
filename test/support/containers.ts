import { execFile, spawnSync } from 'node:child_process'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'

// The container engine the image tests use: podman or a running docker, whichever is here
// (CONTAINER_ENGINE=podman|docker chooses, =none neither; PODMAN_RUNTIME=runc passes --runtime to podman, as
// scripts/image.sh does). Without one, those tests are skipped with the reason printed, unless
// REQUIRE_CONTAINER=1 (CI), which makes it a failure.

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version

/** The image `npm run image` builds from this tree. */
const IMAGE = `petstore-orders:${VERSION}`

interface Result {
  code: number | null
  stdout: string
  stderr: string
}

export interface Engine {
  name: 'podman' | 'docker'
  /** Runs `ENGINE ARGS…` to its end; never throws for a non-zero exit. */
  run(args: string[], options?: { timeoutMs?: number }): Promise<Result>
  /** Like run, but a non-zero exit throws with what the engine printed. */
  ok(args: string[], options?: { timeoutMs?: number }): Promise<string>
  /** Arguments every `run` and `create` needs on this host (see runArgs below). */
  runArgs: string[]
}

let found: { engine: Engine | undefined; reason: string | undefined } | undefined

function detect(): { engine: Engine | undefined; reason: string | undefined } {
  const wanted = process.env.CONTAINER_ENGINE
  // CONTAINER_ENGINE=none (or anything but the two) chooses neither.
  const candidates: readonly ('podman' | 'docker')[] = wanted === undefined || wanted === '' ? ['podman', 'docker'] : wanted === 'podman' || wanted === 'docker' ? [wanted] : []
  for (const name of candidates) {
    // docker's client answers --version without an engine: `info` asks the engine itself.
    const probe = spawnSync(name, name === 'docker' ? ['info'] : ['--version'], { stdio: 'ignore', timeout: 30_000 })
    if (probe.status === 0) return { engine: makeEngine(name), reason: undefined }
  }
  const chosen = wanted === undefined || wanted === '' ? '' : ` (CONTAINER_ENGINE=${wanted})`
  return { engine: undefined, reason: `no container engine: neither podman nor a running docker was found${chosen}` }
}

function makeEngine(name: 'podman' | 'docker'): Engine {
  const globalArgs = name === 'podman' && process.env.PODMAN_RUNTIME ? ['--runtime', process.env.PODMAN_RUNTIME] : []
  const run = (args: string[], options: { timeoutMs?: number } = {}): Promise<Result> =>
    new Promise((resolve) => {
      const child = execFile(name, [...globalArgs, ...args], { timeout: options.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024 }, (_error, stdout, stderr) =>
        resolve({ code: child.exitCode, stdout, stderr }),
      )
    })
  const engine: Engine = {
    name,
    run,
    async ok(args, options) {
      const result = await run(args, options)
      if (result.code !== 0) throw new Error(`${name} ${args.join(' ')} exited ${result.code}: ${result.stderr.trim() || result.stdout.trim()}`)
      return result.stdout
    },
    runArgs: name === 'podman' ? podmanLimits() : [],
  }
  return engine
}

/**
 * podman asks for 1048576 open files and 4194304 processes in every container by default; a host
 * that does not let a process raise its limits (a sandbox, as CI's machine is) refuses that at the
 * container's start ("error setting rlimits"). There the containers get this process's own hard
 * limits instead, processes capped at the kernel's pid_max, as conmon's are.
 */
function podmanLimits(): string[] {
  let limits: string
  try {
    limits = readFileSync('/proc/self/limits', 'utf8')
  } catch {
    return []
  }
  const hard = (name: string): number | undefined => {
    const value = new RegExp(`^${name}\\s+\\S+\\s+(\\S+)`, 'm').exec(limits)?.[1]
    return value === undefined || value === 'unlimited' ? undefined : Number(value)
  }
  const files = hard('Max open files')
  const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim())
  const processes = Math.min(hard('Max processes') ?? Infinity, pidMax)
  return [
    ...(files === undefined || files >= 1_048_576 ? [] : ['--ulimit', `nofile=${files}:${files}`]),
    ...(Number.isFinite(processes) && processes < 4_194_304 ? ['--ulimit', `nproc=${processes}:${processes}`] : []),
  ]
}

/** The engine, or undefined when there is none; with REQUIRE_CONTAINER=1 none is an error. */
export function containerEngine(): Engine | undefined {
  found ??= detect()
  if (found.engine === undefined && process.env.REQUIRE_CONTAINER === '1') throw new Error(`REQUIRE_CONTAINER=1 but ${found.reason}`)
  return found.engine
}

/** Why the container tests are skipped (printed), or false to run them. */
export function containerSkipReason(): string | false {
  const engine = containerEngine()
  if (engine !== undefined) return false
  const reason = `${found!.reason}; REQUIRE_CONTAINER=1 makes this a failure`
  console.log(`# skipping container tests: ${reason}`)
  return reason
}

/**
 * Builds the image from this tree with `npm run image` (scripts/image.sh), once per test run: the
 * test files of one run share the build (a lock file orders them, a marker keyed by the runner's
 * pid says it is done), and the next run builds again, so no test ever runs an image of older code.
 * The engine's layer cache makes a build of an unchanged tree quick.
 */
export async function ensureImage(engine: Engine): Promise<string> {
  const marker = join(tmpdir(), `petstore-orders-image-built-by-${process.ppid}`)
  const lock = join(tmpdir(), 'petstore-orders-image-build.lock')
  while (!takeLock(lock)) await sleep(500)
  try {
    if (existsSync(marker)) return IMAGE
    const build = await new Promise<Result>((resolve) => {
      const child = execFile('bash', [join(ROOT, 'scripts/image.sh')], {
        cwd: ROOT,
        env: { ...process.env, CONTAINER_ENGINE: engine.name },
        timeout: 30 * 60_000,
        maxBuffer: 256 * 1024 * 1024,
      }, (_error, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }))
    })
    if (build.code !== 0) throw new Error(`npm run image failed (exit ${build.code}):\n${(build.stdout + build.stderr).slice(-4000)}`)
    writeFileSync(marker, IMAGE)
    return IMAGE
  } finally {
    rmSync(lock, { force: true })
  }
}

/** Takes the lock file, or one left by a process that is gone; false while a live process holds it. */
function takeLock(lock: string): boolean {
  try {
    writeFileSync(lock, String(process.pid), { flag: 'wx' })
    return true
  } catch {
    try {
      process.kill(Number(readFileSync(lock, 'utf8')), 0)
      return false
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') rmSync(lock, { force: true })
      return false
    }
  }
}

/** A container's health as the engine reports it (podman 4 and docker spell the field differently). */
export async function healthStatus(engine: Engine, container: string): Promise<string> {
  const state = JSON.parse(await engine.ok(['inspect', '--format', '{{json .State}}', container])) as {
    Health?: { Status?: string }
    Healthcheck?: { Status?: string }
  }
  return state.Health?.Status ?? state.Healthcheck?.Status ?? ''
}

/** Waits until `url` answers 200, or the container has exited (then throws with its logs). */
export async function waitForHttp(engine: Engine, container: string, url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(2000) })).ok) return
    } catch {
      // not listening yet
    }
    const running = (await engine.run(['inspect', '--format', '{{.State.Running}}', container])).stdout.trim()
    if (running !== 'true' || Date.now() > deadline) {
      const logs = await engine.run(['logs', container])
      throw new Error(`${container} ${running === 'true' ? 'did not answer ' + url : 'exited'}: ${logs.stdout}${logs.stderr}`)
    }
    await sleep(200)
  }
}
