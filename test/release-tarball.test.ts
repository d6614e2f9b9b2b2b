import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { loadConfig, type Config } from '../src/config.js'
import { createDatabase, forEachStore, type TestDatabaseHandle } from './support/harness.js'
import { freePort } from './support/server-process.js'

// The release for a host without containers, as its user meets it: `npm pack` in the clone, then
// `npm install -g` of that file on a host with Node and nothing else (no compiler, no python, no
// registry, no npm cache, no ~/.npmrc), then the installed command run from a folder of its own.
// Every command the installed service runs is fenced by Node's permission model to read files
// under the install prefix and its database folder only, so nothing can come from the clone.

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const MANIFEST = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> }
const UNIT = 'deploy/systemd/petstore-orders.service'
const ENV_EXAMPLE = 'deploy/systemd/petstore-orders.env'
const INSTALLED_COMMAND = '/usr/local/bin/petstore-orders' // where the unit expects it (docs/deploy.md)

/** The package's own files, all of them: the built service, the page script /docs serves, the client, the unit. */
const SHIPPED = [
  /^package\.json$/,
  /^README\.md$/,
  /^LICENSE$/,
  /^bin\/petstore-orders\.js$/,
  /^dist\/[\w/.-]+\.(js|d\.ts)$/,
  /^src\/http\/assets\/[\w.-]+\.js$/,
  /^packages\/client\/(README\.md|dist\/[\w.-]+\.(js|d\.ts))$/,
  /^deploy\/systemd\/petstore-orders\.(service|env)$/,
]

const run = promisify(execFile)

/** The environment without what `npm test` passes down to its children (npm_config_*, …). */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'NODE_OPTIONS'))
}

function onPath(command: string): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && existsSync(join(dir, command))) return realpathSync(join(dir, command))
  }
  throw new Error(`${command} is not on PATH`)
}

/**
 * The packages under `dir` that npm would run a script of at install: preinstall, install or
 * postinstall, or a binding.gyp it builds with node-gyp (unless the package says `gypfile: false`).
 */
function installScripts(dir: string): string[] {
  const found: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith('.')) continue
    const path = join(dir, entry.name)
    if (entry.name.startsWith('@')) {
      found.push(...installScripts(path)) // a scope's folder
      continue
    }
    const manifest = JSON.parse(readFileSync(join(path, 'package.json'), 'utf8')) as { name: string; scripts?: Record<string, string>; gypfile?: boolean }
    const scripts = ['preinstall', 'install', 'postinstall'].filter((script) => manifest.scripts?.[script] !== undefined)
    if (scripts.length > 0 || (existsSync(join(path, 'binding.gyp')) && manifest.gypfile !== false)) found.push(manifest.name)
    if (existsSync(join(path, 'node_modules'))) found.push(...installScripts(join(path, 'node_modules')))
  }
  return found.sort()
}

interface Packed {
  filename: string
  size: number
  unpackedSize: number
  entryCount: number
  files: { path: string; size: number }[]
  bundled: string[]
}

let work: string
let tarball: Packed
let prefix: string // where `npm install -g --prefix` put the package: PREFIX/bin, PREFIX/lib/node_modules
let installed: string // PREFIX/lib/node_modules/petstore-orders
let command: string // PREFIX/bin/petstore-orders
let bareBin: string // node, npm and sh: a host with Node and nothing to build with
let installOutput: string

before(async () => {
  assert.ok(existsSync(join(ROOT, 'dist/cli/main.js')), 'dist/ is missing: run `npm run build` first')
  work = realpathSync(mkdtempSync(join(tmpdir(), 'petstore-release-')))
  // --ignore-scripts: pack the dist/ that `npm test` built before running the tests (its first
  // step), rather than rebuilding it (the prepare script) under the other test files.
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
    cwd: ROOT,
    env: cleanEnv(),
    timeout: 300_000,
    maxBuffer: 64 * 1024 * 1024,
  })
  ;[tarball] = JSON.parse(packed.stdout) as [Packed]

  bareBin = join(work, 'bin')
  mkdirSync(bareBin)
  symlinkSync(process.execPath, join(bareBin, 'node'))
  symlinkSync(onPath('npm'), join(bareBin, 'npm'))
  symlinkSync(onPath('sh'), join(bareBin, 'sh'))

  // The command docs/deploy.md gives, as on a fresh host: a HOME of its own (no ~/.npmrc, an empty
  // npm cache) and --offline, so that anything the tarball does not hold fails the install instead
  // of coming from the registry. --ignore-scripts as documented: nothing needs one (checked below).
  const home = join(work, 'home')
  const elsewhere = join(work, 'elsewhere')
  prefix = join(work, 'prefix')
  for (const dir of [home, elsewhere]) mkdirSync(dir)
  const install = await run(
    'npm',
    ['install', '--global', '--prefix', prefix, '--ignore-scripts', '--offline', '--no-audit', '--no-fund', '--loglevel=warn', join(work, tarball.filename)],
    { cwd: elsewhere, env: { HOME: home, PATH: bareBin }, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 },
  ).catch((error: { stdout?: string; stderr?: string }) => assert.fail(`npm install -g failed:\n${error.stdout ?? ''}${error.stderr ?? String(error)}`))
  installOutput = install.stdout + install.stderr
  installed = join(prefix, 'lib/node_modules/petstore-orders')
  command = join(prefix, 'bin/petstore-orders')
})

after(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true })
})

/**
 * Node's permission model for every process the test starts from the installed package: files may
 * be read under the prefix (and `dirs`) only, written in `dirs` only; better-sqlite3 is an addon;
 * the network is open.
 */
function fenced(dirs: string[] = []): string {
  // Node 26 fences the network too: the server listens and talks to its database.
  const network = process.allowedNodeEnvironmentFlags.has('--allow-net') ? ['--allow-net'] : []
  return ['--permission', '--allow-addons', ...network, ...[prefix, ...dirs].map((dir) => `--allow-fs-read="${dir}"`), ...dirs.map((dir) => `--allow-fs-write="${dir}"`)].join(' ')
}

/** What a user's shell gives the installed command: a PATH with node, a folder of its own, a database. */
function userEnv(cwd: string, dirs: string[], env: Record<string, string>): NodeJS.ProcessEnv {
  return { HOME: cwd, PATH: bareBin, LOG_LEVEL: 'warn', NODE_OPTIONS: fenced(dirs), ...env }
}

/** A new empty folder to run from, outside the clone and the prefix. */
function emptyFolder(name: string): string {
  const dir = join(work, name)
  mkdirSync(dir)
  return dir
}

describe('the tarball `npm pack` makes', () => {
  it('holds the built service, the page script /docs serves, the client, the unit, and the README: no tests, sources or source maps', (t) => {
    const own = tarball.files.map((file) => file.path).filter((path) => !path.startsWith('node_modules/'))
    for (const path of own) assert.ok(SHIPPED.some((pattern) => pattern.test(path)), `${path} is in the tarball`)
    for (const path of ['bin/petstore-orders.js', 'dist/cli/main.js', 'src/http/assets/docs-page.js', 'packages/client/dist/index.js', UNIT, ENV_EXAMPLE, 'README.md']) {
      assert.ok(own.includes(path), `${path} is not in the tarball`)
    }
    t.diagnostic(
      `${tarball.filename}: ${(tarball.size / 1024 / 1024).toFixed(1)} MiB, ${(tarball.unpackedSize / 1024 / 1024).toFixed(1)} MiB unpacked, ` +
        `${tarball.entryCount} files (${own.length} its own, the rest ${tarball.bundled.length} bundled packages)`,
    )
  })

  it('ships the LICENSE', () => {
    assert.ok(tarball.files.some((file) => file.path === 'LICENSE'))
  })

  it('bundles every dependency, as package-lock.json locks them: the installed tree is the tested one', () => {
    for (const name of Object.keys(MANIFEST.dependencies)) assert.ok(tarball.bundled.includes(name), `${name} is not bundled`)
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; dev?: boolean; link?: boolean }> }
    let checked = 0
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (!path.startsWith('node_modules/') || entry.dev === true || entry.link === true) continue
      const manifest = join(installed, path, 'package.json')
      assert.ok(existsSync(manifest), `${path} (${entry.version}, locked) is not installed`)
      assert.equal((JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version, entry.version, path)
      checked++
    }
    assert.ok(checked >= Object.keys(MANIFEST.dependencies).length)
  })
})

describe('npm install -g of the tarball, on a host with Node only', () => {
  it('installs offline with an empty cache, compiles nothing and warns of nothing', () => {
    assert.equal(installOutput.replace(/^\s*added 1 package in .*$/m, '').trim(), '')
    // No compiled addon: better-sqlite3 loads its own prebuilt binary. (An npm before 11.21 runs the
    // `node-gyp rebuild` it infers from binding.gyp at `npm ci` in the clone, whose build/ is then
    // bundled; better-sqlite3's binding.gyp makes that a configure with no target where a prebuild
    // exists, so build/ holds makefiles and no binary.)
    assert.deepEqual(readdirSync(join(installed, 'node_modules/better-sqlite3'), { recursive: true }).filter((file) => String(file).endsWith('.node') && !String(file).startsWith('prebuilds')), [])
  })

  it("has no install script but @scarf/scarf's, which the package turns off: without --ignore-scripts nothing more runs", () => {
    assert.deepEqual(installScripts(join(installed, 'node_modules')), ['@scarf/scarf'])
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { scarfSettings?: { enabled?: boolean } }
    assert.equal(manifest.scarfSettings?.enabled, false)
  })

  it('puts the package itself under the prefix (a copy, not a link to the clone) and its command in PREFIX/bin', () => {
    assert.ok(lstatSync(installed).isDirectory(), `${installed} is not a folder of its own`)
    assert.equal(realpathSync(command), join(installed, 'bin/petstore-orders.js'))
    assert.ok(!realpathSync(installed).startsWith(realpathSync(ROOT)))
  })

  it('runs in a fence that refuses to read the clone, and reads the prefix', async () => {
    const read = (path: string) =>
      run('node', ['-e', `require('node:fs').readFileSync(${JSON.stringify(path)})`], { env: userEnv(work, [], {}), timeout: 60_000 })
    await assert.rejects(read(join(ROOT, 'package.json')), (error: { stderr?: string }) => /ERR_ACCESS_DENIED/.test(error.stderr ?? ''))
    await read(join(installed, 'package.json'))
  })

  it('prints its version, from any folder', async () => {
    const cwd = emptyFolder('version')
    const { stdout } = await run(command, ['--version'], { cwd, env: userEnv(cwd, [], {}), timeout: 60_000 })
    assert.equal(stdout.trim(), MANIFEST.version)
  })
})

forEachStore('the installed petstore-orders, run from another folder', (kind) => {
  let database: TestDatabaseHandle
  before(async () => {
    database = await createDatabase(kind)
  })
  after(async () => {
    await database?.dispose()
  })

  it('migrates, creates a key, serves the API, its documents, /docs and its assets, its client imports, and SIGTERM ends it with 0', async (t) => {
    const cwd = emptyFolder(`run-${kind}`)
    const dirs = database.config.kind === 'sqlite' ? [dirname(database.config.path)] : []
    const env = userEnv(cwd, dirs, { DATABASE_URL: database.url })

    const migrated = await run(command, ['migrate'], { cwd, env, timeout: 120_000 })
    assert.match(migrated.stdout, /^applied migration 1$/m)
    const key = (await run(command, ['keys', 'create', '--name', 'release-test'], { cwd, env, timeout: 60_000 })).stdout.trim()
    assert.match(key, /^pso_/)

    const port = await freePort()
    const server = spawn(command, ['serve'], { cwd, env: { ...env, HOST: '127.0.0.1', PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    server.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    server.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })))
    t.after(() => server.kill('SIGKILL'))
    const origin = `http://127.0.0.1:${port}`
    for (;;) {
      assert.equal(server.exitCode, null, `the installed server exited at start:\n${output}`)
      if (await fetch(`${origin}/healthz`).then((response) => response.ok, () => false)) break
      await sleep(50)
    }

    assert.equal((await fetch(`${origin}/readyz`)).status, 200)
    for (const version of ['v1', 'v2']) {
      const response = await fetch(`${origin}/${version}/openapi.json`)
      assert.equal(response.status, 200, `/${version}/openapi.json`)
      const document = (await response.json()) as { openapi: string; paths: Record<string, unknown> }
      assert.match(document.openapi, /^3\./)
      assert.ok(Object.keys(document.paths).length > 0)
    }
    const page = await fetch(`${origin}/docs`)
    assert.equal(page.status, 200)
    const assets = [...(await page.text()).matchAll(/(?:src|href)="(docs\/[^"]+)"/g)].map((match) => match[1]!)
    assert.ok(assets.includes('docs/init.js') && assets.includes('docs/assets/swagger-ui-bundle.js'), assets.join(', '))
    for (const asset of assets) {
      const response = await fetch(`${origin}/${asset}`)
      assert.equal(response.status, 200, asset)
      assert.ok((await response.arrayBuffer()).byteLength > 0, asset)
    }
    assert.equal(await (await fetch(`${origin}/docs/init.js`)).text(), readFileSync(join(ROOT, 'src/http/assets/docs-page.js'), 'utf8'))

    // petstore-orders/client, as a program beside the installed package imports it.
    const project = emptyFolder(`client-${kind}`)
    mkdirSync(join(project, 'node_modules'))
    symlinkSync(installed, join(project, 'node_modules/petstore-orders'))
    writeFileSync(
      join(project, 'use.mjs'),
      `import { createClient, createV2Client } from 'petstore-orders/client'
const { ORIGIN: origin, API_KEY: apiKey } = process.env
const orders = await createClient({ baseUrl: origin + '/v1', apiKey }).listOrders()
const page = await createV2Client({ baseUrl: origin + '/v2', apiKey }).listOrdersPage({ limit: 1 })
console.log(JSON.stringify({ from: import.meta.resolve('petstore-orders/client'), orders: orders.length, page: page.data.length }))
`,
    )
    const used = await run('node', ['use.mjs'], { cwd: project, env: { ...userEnv(project, [project], {}), ORIGIN: origin, API_KEY: key }, timeout: 60_000 })
    const result = JSON.parse(used.stdout) as { from: string; orders: number; page: number }
    assert.equal(result.from, `file://${join(installed, 'packages/client/dist/index.js')}`)
    assert.deepEqual({ orders: result.orders, page: result.page }, { orders: 0, page: 0 })

    server.kill('SIGTERM')
    assert.deepEqual(await exited, { code: 0, signal: null }, output)
    assert.doesNotMatch(output, /ERR_ACCESS_DENIED|"level":(50|60)/)
  })
})

/** The unit's settings (the last of each name wins, Environment= and EnvironmentFile= add up), `#` lines left out. */
function unitSettings(text: string): Map<string, string[]> {
  const settings = new Map<string, string[]>()
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z]+)=(.*)$/.exec(line)
    if (match !== null) settings.set(match[1]!, [...(settings.get(match[1]!) ?? []), match[2]!])
  }
  return settings
}

/** NAME=value lines; with `examples`, also the commented-out `#NAME=value` ones. */
function envLines(text: string, examples: boolean): Record<string, string> {
  const pattern = examples ? /^#?([A-Z][A-Z0-9_]*)=(.*)$/ : /^([A-Z][A-Z0-9_]*)=(.*)$/
  return Object.fromEntries(text.split('\n').flatMap((line) => {
    const match = pattern.exec(line)
    return match === null ? [] : [[match[1]!, match[2]!]]
  }))
}

/** Descriptors a serving instance may hold at once under `config`, plus 64 for Node's own, the SQLite files and the log. */
function descriptorsNeeded(config: Config): number {
  const database = config.database.kind === 'postgres' ? config.database.poolSize + 4 : 0 // + the webhook deliveries' own pool
  return config.http.maxConnections + config.list.maxResponses + config.webhooks.concurrency + database + 64
}

describe(UNIT, () => {
  const unit = readFileSync(join(ROOT, UNIT), 'utf8')
  const settings = unitSettings(unit)
  const one = (name: string): string => {
    const values = settings.get(name)
    assert.equal(values?.length, 1, `${name}= set ${values?.length ?? 0} times`)
    return values![0]!
  }

  it('starts the command where the documented install puts it, as its own user, with its state in /var/lib', () => {
    assert.equal(one('ExecStart'), `${INSTALLED_COMMAND} serve`)
    assert.equal(one('User'), 'petstore-orders')
    assert.equal(one('StateDirectory'), 'petstore-orders')
    assert.equal(one('WorkingDirectory'), '/var/lib/petstore-orders')
    // No DATABASE_URL of its own: the default SQLite file lands in the state directory, and a
    // DATABASE_URL_FILE credential can be used without a conflict.
    assert.deepEqual((settings.get('Environment') ?? []).filter((value) => /^DATABASE_URL=/.test(value)), [])
  })

  it("waits longer than the service's shutdown and allows it more descriptors than it may hold, with the example settings too", () => {
    const timeoutStop = /^(\d+)s$/.exec(one('TimeoutStopSec'))
    assert.ok(timeoutStop !== null, 'TimeoutStopSec= in seconds, as "45s"')
    const limit = Number(one('LimitNOFILE'))
    const unitEnv = Object.fromEntries((settings.get('Environment') ?? []).map((value) => value.split(/=(.*)/s).slice(0, 2) as [string, string]))
    const example = readFileSync(join(ROOT, ENV_EXAMPLE), 'utf8')
    for (const examples of [false, true]) {
      const config = loadConfig({ ...unitEnv, ...envLines(example, examples) })
      assert.ok(Number(timeoutStop[1]) * 1000 > config.shutdownTimeoutMs, `TimeoutStopSec=${timeoutStop[1]}s, SHUTDOWN_TIMEOUT_MS=${config.shutdownTimeoutMs}`)
      assert.ok(limit > descriptorsNeeded(config), `LimitNOFILE=${limit}, ${descriptorsNeeded(config)} descriptors needed`)
    }
  })
})

/** Why `systemd-analyze verify` cannot judge a unit here, or undefined when it can: it must pass a unit known to be good. */
async function systemdVerifyUnavailable(): Promise<string | undefined> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-unit-probe-'))
  try {
    const probe = join(dir, 'probe.service')
    writeFileSync(probe, `[Service]\nExecStart=${process.execPath} --version\n`)
    const { stdout, stderr } = await run('systemd-analyze', ['verify', probe], { timeout: 60_000 })
    return stdout + stderr === '' ? undefined : `systemd-analyze verify finds fault with a good unit here: ${(stdout + stderr).trim().split('\n')[0]}`
  } catch (error) {
    const { code, stderr } = error as { code?: string | number; stderr?: string }
    return code === 'ENOENT'
      ? 'systemd-analyze is not installed (apt-get install systemd)'
      : `systemd-analyze verify does not work here: ${(stderr ?? String(error)).trim().split('\n')[0]}`
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const verifySkip = await systemdVerifyUnavailable()
if (verifySkip !== undefined) console.log(`# skipping the systemd unit's verification: ${verifySkip}`)

describe('the installed systemd unit, pointed at the installed command', { skip: verifySkip }, () => {
  /** The installed copy of the unit with ExecStart at this test's prefix; `credentials`: its optional credential lines in force. */
  function unitCopy(name: string, credentials: boolean): string {
    let text = readFileSync(join(installed, UNIT), 'utf8').replaceAll(INSTALLED_COMMAND, command)
    if (credentials) text = text.replace(/^#((?:LoadCredential|Environment)=)/gm, '$1')
    const path = join(emptyFolder(`unit-${name}`), 'petstore-orders.service')
    writeFileSync(path, text)
    return path
  }

  async function verify(path: string): Promise<void> {
    const { stdout, stderr } = await run('systemd-analyze', ['verify', path], { timeout: 60_000 }).catch((error: { stdout?: string; stderr?: string }) =>
      assert.fail(`systemd-analyze verify failed:\n${error.stdout ?? ''}${error.stderr ?? String(error)}`),
    )
    // Unknown or misspelt settings are warnings, with exit 0: any line about the unit is a failure.
    const about = (stdout + stderr).split('\n').filter((line) => line.includes('petstore-orders'))
    assert.deepEqual(about, [])
  }

  it('passes systemd-analyze verify, as shipped and with its credential lines in force', async (t) => {
    const shipped = unitCopy('shipped', false)
    await verify(shipped)
    const withCredentials = unitCopy('credentials', true)
    assert.match(readFileSync(withCredentials, 'utf8'), /^LoadCredential=database-url:/m)
    await verify(withCredentials)
    // Informative: how much of the system the service is kept from (lower is better, 0–10).
    const security = await run('systemd-analyze', ['security', '--offline=yes', shipped], { timeout: 60_000 }).then(
      ({ stdout }) => /Overall exposure level[^:]*: (.*)/.exec(stdout)?.[1] ?? 'no exposure level printed',
      (error: { stderr?: string }) => `not measured: ${(error.stderr ?? String(error)).trim().split('\n')[0]}`,
    )
    t.diagnostic(`systemd-analyze security: ${security}`)
  })
})
