import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { containerEngine, containerSkipReason, ensureImage, type Engine } from './support/containers.js'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './support/postgres.js'
import { REDIS_URL, redisSkipReason } from './support/redis.js'
import { freePort } from './support/server-process.js'

// docs/deploy.md, run: every ```sh block of it, in order, in one shell (each block's variables and
// files are there for the next), in a copy of this tree, as a user would type them. What differs from
// a user's machine, and only that:
// - `docker` is podman here (a shim: `docker compose` is docker-compose, `docker build` adds
//   --format docker, `docker run` the limits this host allows; test/support/containers.ts);
// - `npm install -g --prefix /usr/local` installs into a temporary prefix instead, and `sudo` runs
//   its command as the test's own user;
// - the host port 8080 is a free port (the doc's `127.0.0.1:8080`), and DATABASE_URL and REDIS_URL
//   are this test's PostgreSQL database and Redis;
// - a block preceded by `<!-- not run here: WHY -->` is not run, and WHY is printed.

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const DOC_PATH = join(ROOT, 'docs/deploy.md')
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version
/** The containers and volumes the doc makes, removed before and after the run. */
const CONTAINERS = ['petstore', 'petstore-1', 'petstore-2']
const VOLUMES = ['petstore-data']

interface Block {
  line: number
  text: string
  notRunHere: string | undefined
}

/** The doc's ```sh blocks, each with the reason it is not run here when the comment above it gives one. */
function shellBlocks(doc: string): Block[] {
  const found: Block[] = []
  for (const match of doc.matchAll(/(?:<!-- not run here: ([^\n]*?) -->\n)?```sh\n([\s\S]*?)```/g)) {
    found.push({ line: doc.slice(0, match.index).split('\n').length, text: match[2]!, notRunHere: match[1] })
  }
  return found
}

const skip = containerSkipReason()
const engine = containerEngine() as Engine
let scratch: string
let database: TestDatabase | undefined
let reason: string | undefined

async function removeLeftovers(): Promise<void> {
  for (const container of CONTAINERS) await engine.run(['rm', '--force', '--time', '0', container])
  for (const volume of VOLUMES) await engine.run(['volume', 'rm', '--force', volume])
}

before(async () => {
  if (skip !== false) return
  reason = (await postgresSkipReason()) ?? (await redisSkipReason())
  if (reason !== undefined) return
  await ensureImage(engine)
  database = await createTestDatabase()
  await removeLeftovers()
  scratch = mkdtempSync(join(tmpdir(), 'petstore-deploy-doc-'))
}, { timeout: 40 * 60_000 })

after(async () => {
  if (skip !== false || reason !== undefined) return
  await removeLeftovers()
  await database?.drop()
  rmSync(scratch, { recursive: true, force: true })
})

it('has a tag of this version in every image reference, and a reason above every block it does not run', () => {
  const doc = readFileSync(DOC_PATH, 'utf8')
  for (const [tag] of doc.matchAll(/petstore-orders:\d+\.\d+\.\d+/g)) assert.equal(tag, `petstore-orders:${VERSION}`)
  const blocks = shellBlocks(doc)
  assert.ok(blocks.length >= 10, `only ${blocks.length} command blocks`)
  // A comment that is not right above its block would leave that block unexplained, or run.
  assert.equal([...doc.matchAll(/<!-- not run here:/g)].length, blocks.filter((block) => block.notRunHere !== undefined).length)
})

it('runs every command block of docs/deploy.md as written, in order', { skip, timeout: 30 * 60_000 }, async (t) => {
  if (reason !== undefined) return t.skip(reason)
  const doc = readFileSync(DOC_PATH, 'utf8')
  const port = await freePort()
  const tree = join(scratch, 'petstore-orders')
  copyTree(tree)
  const shims = join(scratch, 'bin')
  writeDockerShim(shims, engine)
  writeSudoShim(shims)
  const prefix = join(scratch, 'prefix')

  const script = ['set -euo pipefail']
  for (const block of shellBlocks(doc)) {
    if (block.notRunHere !== undefined) {
      t.diagnostic(`docs/deploy.md line ${block.line}: not run here: ${block.notRunHere}`)
      continue
    }
    const text = block.text.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`).replaceAll('--prefix /usr/local', `--prefix ${prefix}`)
    script.push(`echo "::block ${block.line}" >&2`, text)
  }
  const result = await bash(script.join('\n'), tree, {
    PATH: `${shims}:${join(prefix, 'bin')}:${process.env.PATH}`,
    HOME: process.env.HOME,
    DATABASE_URL: database!.url,
    REDIS_URL,
    npm_config_prefix: prefix,
    npm_config_prefer_offline: 'true',
    npm_config_update_notifier: 'false',
    ...(process.env.PODMAN_RUNTIME ? { PODMAN_RUNTIME: process.env.PODMAN_RUNTIME } : {}),
  })
  const lastBlock = [...result.stderr.matchAll(/^::block (\d+)$/gm)].at(-1)?.[1]
  assert.equal(result.code, 0, `the block at docs/deploy.md line ${lastBlock} failed (exit ${result.code}):\n${result.stderr.slice(-3000)}\n${result.stdout.slice(-2000)}`)
  t.diagnostic(result.stdout.slice(-2000))
})

/**
 * The tree as git knows it (tracked and untracked files, not what git ignores), and a copy of its
 * node_modules: `npm pack` bundles the dependencies, and a link would put paths outside the package
 * into the tarball.
 */
function copyTree(to: string): void {
  mkdirSync(to, { recursive: true })
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT }).toString().split('\0').filter(Boolean)
  for (const file of files) {
    let content: Buffer
    try {
      content = readFileSync(join(ROOT, file))
    } catch {
      continue // deleted in the working tree
    }
    mkdirSync(dirname(join(to, file)), { recursive: true })
    writeFileSync(join(to, file), content)
  }
  for (const executable of ['scripts/image.sh', 'scripts/stand-in-base-images.sh', 'scripts/with-node.sh', 'scripts/node24.sh', 'bin/petstore-orders.js']) {
    chmodSync(join(to, executable), 0o755)
  }
  execFileSync('cp', ['-a', join(ROOT, 'node_modules'), join(to, 'node_modules')])
}

/** `docker` as this machine has it: podman (docker-compose for `docker compose`); docker itself needs none. */
function writeDockerShim(dir: string, engine: Engine): void {
  mkdirSync(dir, { recursive: true })
  if (engine.name === 'docker') return
  const runtime = process.env.PODMAN_RUNTIME ? `--runtime ${process.env.PODMAN_RUNTIME}` : ''
  const shim = `#!/usr/bin/env bash
case "$1" in
  compose) shift; exec docker-compose "$@" ;;
  build) shift; exec podman ${runtime} build --format docker "$@" ;;
  run | create) command=$1; shift; exec podman ${runtime} "$command" ${engine.runArgs.join(' ')} "$@" ;;
  *) exec podman ${runtime} "$@" ;;
esac
`
  writeFileSync(join(dir, 'docker'), shim, { mode: 0o755 })
}

/** `sudo COMMAND` runs COMMAND as the test's own user. */
function writeSudoShim(dir: string): void {
  writeFileSync(join(dir, 'sudo'), '#!/usr/bin/env bash\nexec "$@"\n', { mode: 0o755 })
}

function bash(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}
