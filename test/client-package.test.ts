import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { startTestServer } from './support/harness.js'

// What another project gets from `npm pack` of the client's workspace package: installed into an
// empty project (install scripts allowed, as a user's npm would), it must bring no part of the
// server, build nothing, warn about no engine, and work there, types included.

const NAME = '@petstore-orders/client'
const ROOT = fileURLToPath(new URL('../', import.meta.url))
const PACKAGE_DIR = join(ROOT, 'packages/client')
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc')
const SERVER_PACKAGES = ['petstore-orders', 'fastify', 'pg', 'better-sqlite3', 'ioredis', 'pino', 'prom-client']
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall']

const run = promisify(execFile)

/** The environment without what `npm test` passes down to its children (npm_config_*, …). */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'NODE_OPTIONS'))
}

function npm(args: string[], cwd: string): Promise<{ stdout: string; stderr: string }> {
  return run('npm', args, { cwd, env: cleanEnv(), timeout: 120_000, maxBuffer: 16 * 1024 * 1024 })
}

function bytesIn(dir: string): number {
  let total = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) total += bytesIn(path)
    else if (entry.isFile()) total += statSync(path).size
  }
  return total
}

interface LockEntry {
  version?: string
  hasInstallScript?: boolean
  dev?: boolean
}

it(`${NAME} pins its dependencies exactly, as the lock file does`, () => {
  const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, Record<string, unknown>> }
  for (const kind of ['dependencies', 'devDependencies']) {
    assert.deepEqual(lock.packages['packages/client']?.[kind] ?? {}, manifest[kind] ?? {}, `package-lock.json's ${kind} of the client differ: run npm install`)
    for (const [name, version] of Object.entries(manifest[kind] ?? {})) {
      assert.match(version, /^\d+\.\d+\.\d+$/, `${kind}.${name} is "${version}", not an exact version`)
      assert.equal(lock.packages[`node_modules/${name}`]?.version, version, `package-lock.json locks ${name} at another version than ${version}`)
    }
  }
})

describe(`${NAME} packed and installed into an empty project`, () => {
  let work: string
  let project: string
  let installOutput: string
  let installMs: number

  before(async () => {
    assert.ok(existsSync(join(PACKAGE_DIR, 'dist/index.js')), 'packages/client/dist is missing: run `npm run build` first')
    work = mkdtempSync(join(tmpdir(), 'petstore-client-pack-'))
    // --ignore-scripts: pack the dist `npm test` built, without rebuilding it under other test files.
    const packed = await npm(['pack', '--workspace', NAME, '--pack-destination', work, '--ignore-scripts', '--json'], ROOT)
    const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }]
    project = join(work, 'project')
    mkdirSync(project)
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }))
    const started = performance.now()
    const installed = await npm(
      ['install', join(work, filename), '--ignore-scripts=false', '--loglevel=warn', '--prefer-offline', '--no-audit', '--no-fund'],
      project,
    )
    installMs = performance.now() - started
    installOutput = installed.stdout + installed.stderr
  })

  after(() => {
    if (work !== undefined) rmSync(work, { recursive: true, force: true })
  })

  it('ships only the built client and its README', async () => {
    const packed = await npm(['pack', '--workspace', NAME, '--dry-run', '--ignore-scripts', '--json'], ROOT)
    const [{ files }] = JSON.parse(packed.stdout) as [{ files: { path: string }[] }]
    const paths = files.map((file) => file.path).sort()
    assert.ok(paths.includes('dist/index.js') && paths.includes('dist/index.d.ts'), paths.join(', '))
    for (const path of paths) assert.match(path, /^(dist\/[\w-]+\.(js|d\.ts)|package\.json|README\.md)$/)
  })

  it('installs the client, lossless-json and uuid only: nothing of the server, no install script, no engine warning', (t) => {
    const lock = JSON.parse(readFileSync(join(project, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }
    const installed = Object.keys(lock.packages)
      .filter((path) => path !== '')
      .map((path) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length))
    for (const name of SERVER_PACKAGES) assert.ok(!installed.includes(name), `${name} was installed with the client`)
    assert.deepEqual(installed.sort(), [NAME, 'lossless-json', 'uuid'])

    for (const [path, entry] of Object.entries(lock.packages)) {
      assert.notEqual(entry.hasInstallScript, true, `${path} has an install script`)
      if (path === '') continue
      const manifest = JSON.parse(readFileSync(join(project, path, 'package.json'), 'utf8')) as { scripts?: Record<string, string> }
      for (const script of INSTALL_SCRIPTS) assert.equal(manifest.scripts?.[script], undefined, `${path} has a ${script} script`)
      assert.ok(!existsSync(join(project, path, 'binding.gyp')), `${path} has a native build`)
    }
    assert.doesNotMatch(installOutput, /EBADENGINE|gyp/i)

    const bytes = bytesIn(join(project, 'node_modules'))
    t.diagnostic(`${installed.length} packages, ${(bytes / 1024).toFixed(0)} KiB in node_modules, installed in ${installMs.toFixed(0)} ms (Node ${process.version})`)
  })

  it('imports there and speaks to a real server, ids exact', async () => {
    const server = await startTestServer('sqlite')
    await server.importOrders([{ id: 9223372036854775807n, petId: 42n, quantity: 1, status: 'pending' }])
    writeFileSync(
      join(project, 'use.mjs'),
      `import { createClient, createV2Client, PetstoreApiError } from '${NAME}'
const { ORIGIN: origin, API_KEY: apiKey } = process.env
const [order] = await createClient({ baseUrl: origin + '/v1', apiKey }).listOrders()
const page = await createV2Client({ baseUrl: origin + '/v2', apiKey }).listOrdersPage({ limit: 1 })
const error = await createClient({ baseUrl: origin + '/v1', apiKey: 'pso_unknown' }).listOrders().catch((error) => error)
console.log(JSON.stringify({ id: String(order.id), bigint: typeof order.id, status: page.data[0].status, error: error instanceof PetstoreApiError ? error.code : String(error) }))
`,
    )
    const { stdout } = await run(process.execPath, ['use.mjs'], {
      cwd: project,
      env: { ...cleanEnv(), ORIGIN: server.origin, API_KEY: await server.createKey() },
      timeout: 30_000,
    })
    assert.deepEqual(JSON.parse(stdout), { id: '9223372036854775807', bigint: 'bigint', status: 'pending', error: 'unauthorized' })
  })

  it("type-checks there against the package's own declarations, with nothing but fetch's types", async () => {
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2023', lib: ['ES2023', 'DOM'], types: [], strict: true, noEmit: true },
        files: ['use.ts'],
      }),
    )
    writeFileSync(
      join(project, 'use.ts'),
      `import { createClient, createV2Client, type Order, type OrderV2, type OrderPage } from '${NAME}'
const v1 = createClient({ baseUrl: 'http://127.0.0.1:8080/v1', apiKey: 'pso_x' })
const v2 = createV2Client({ baseUrl: 'http://127.0.0.1:8080/v2', apiKey: 'pso_x' })
export const ids: Promise<(bigint | undefined)[]> = v1.listOrders().then((orders: Order[]) => orders.map((order) => order.id))
export const page: Promise<OrderPage> = v2.listOrdersPage({ status: ['pending'], limit: 1 })
export const one: Promise<OrderV2> = v2.getOrder(1n)
// @ts-expect-error a number id could name another order past 2^53
v1.cancelOrder(1)
`,
    )
    await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project, env: cleanEnv(), timeout: 60_000 }).catch(
      (error: { stdout?: string }) => assert.fail(`tsc failed in the consumer project:\n${error.stdout ?? String(error)}`),
    )
  })
})

describe('petstore-orders/client, the path of the client before it had a package of its own', () => {
  it('is the same module as the workspace package, for programs that still import it', async () => {
    const [legacy, client] = await Promise.all([import('petstore-orders/client'), import('@petstore-orders/client')])
    assert.equal(legacy, client)
    assert.equal(typeof legacy.createClient, 'function')
    assert.equal(typeof legacy.createV2Client, 'function')
  })

  it("ships in the server's package: every file its export names is packed", async () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, Record<string, string>> }
    const targets = Object.values(manifest.exports['./client']!).map((target) => target.replace(/^\.\//, ''))
    const packed = await npm(['pack', '--dry-run', '--ignore-scripts', '--json'], ROOT)
    const [{ files }] = JSON.parse(packed.stdout) as [{ files: { path: string }[] }]
    const paths = new Set(files.map((file) => file.path))
    for (const target of targets) assert.ok(paths.has(target), `${target} is not in the server's package`)
  })
})
