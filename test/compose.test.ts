import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { containerEngine, containerSkipReason, ensureImage, waitForHttp, type Engine } from './support/containers.js'
import { place } from './support/place.js'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './support/postgres.js'
import { REDIS_URL, redisSkipReason } from './support/redis.js'
import { freePort } from './support/server-process.js'

// compose.yaml, checked by the compose tools that run without a daemon, then run as far as this
// machine allows: it reaches no image registry, so the postgres, redis and jaeger images cannot be
// pulled. Their place is taken by the test's PostgreSQL and Redis, and the file's own services of
// this image — the migration, then the two instances, in the order of their depends_on, with the
// environment compose resolves for them — run as containers against those.

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const COMPOSE_FILE = `${ROOT}compose.yaml`
const ENV_EXAMPLE = `${ROOT}.env.example`

interface Service {
  image?: string
  command?: string[]
  environment?: Record<string, string | null>
  depends_on?: Record<string, { condition: string }>
  healthcheck?: { test: string[] }
  ports?: (string | { target: number; published: number | string; host_ip?: string })[]
  profiles?: string[]
  restart?: string
  stop_grace_period?: string
}

const hasCompose = spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0
const composeSkip = hasCompose
  ? false
  : process.env.REQUIRE_CONTAINER === '1'
    ? (() => { throw new Error('REQUIRE_CONTAINER=1 but docker-compose is not installed (apt-get install docker-compose)') })()
    : 'docker-compose is not installed (Debian: apt-get install docker-compose); REQUIRE_CONTAINER=1 makes this a failure'
if (composeSkip !== false) console.log(`# skipping compose tests: ${composeSkip}`)

function compose(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // A clean environment: compose reads variables from it before .env, and the test's own must not count.
  const clean = { PATH: process.env.PATH, HOME: process.env.HOME, ...env }
  return new Promise((resolve) => {
    const child = execFile('docker-compose', ['--project-directory', ROOT, '-f', COMPOSE_FILE, ...args], { env: clean, timeout: 60_000 }, (_error, stdout, stderr) =>
      resolve({ code: child.exitCode, stdout, stderr }),
    )
  })
}

/** What each service waits for, by the condition (compose 2 adds fields of its own beside it). */
function conditions(service: Service): Record<string, string> {
  return Object.fromEntries(Object.entries(service.depends_on ?? {}).map(([name, { condition }]) => [name, condition]))
}

/** A published port as HOST_IP:PUBLISHED:TARGET, from compose 1's short form or compose 2's long one. */
function portText(port: NonNullable<Service['ports']>[number]): string {
  if (typeof port === 'string') return port.replace(/\/tcp$/, '')
  return `${port.host_ip ?? ''}:${port.published}:${port.target}`
}

/** The file as compose resolves it with .env.example's values. */
async function resolved(): Promise<Record<string, Service>> {
  const result = await compose(['--env-file', ENV_EXAMPLE, 'config'])
  assert.equal(result.code, 0, result.stderr)
  return (parse(result.stdout) as { services: Record<string, Service> }).services
}

describe('compose.yaml, as compose reads it', { skip: composeSkip }, () => {
  it('is valid (docker-compose config), and refuses to start without the passwords, naming them', async () => {
    const services = await resolved()
    assert.deepEqual(Object.keys(services).sort(), ['jaeger', 'migrate', 'orders-1', 'orders-2', 'postgres', 'redis'])
    const missing = await compose(['config'])
    assert.notEqual(missing.code, 0)
    assert.match(missing.stderr, /set POSTGRES_PASSWORD in \.env|set REDIS_PASSWORD in \.env/)
  })

  it('keeps every password out of the file: each comes from .env', () => {
    const text = readFileSync(COMPOSE_FILE, 'utf8')
    const example = readFileSync(ENV_EXAMPLE, 'utf8')
    for (const [, name, value] of example.matchAll(/^([A-Z_]*PASSWORD)=(.+)$/gm)) {
      assert.ok(!text.includes(value!), `${name}'s value is in compose.yaml`)
      assert.ok(text.includes(`\${${name}:?`), `${name} is not required from the environment`)
    }
  })

  it('runs the migration once PostgreSQL is healthy, and the two instances once it has completed and Redis is healthy', async () => {
    const services = await resolved()
    assert.deepEqual(services.migrate!.command, ['migrate'])
    assert.deepEqual(conditions(services.migrate!), { postgres: 'service_healthy' })
    assert.equal(services.migrate!.restart, 'no')
    for (const name of ['orders-1', 'orders-2']) {
      const service = services[name]!
      assert.deepEqual(conditions(service), { migrate: 'service_completed_successfully', redis: 'service_healthy' })
      assert.equal(service.image, services.migrate!.image)
      assert.deepEqual(service.environment, services.migrate!.environment)
      assert.equal(service.command, undefined, `${name} runs the image's own command (serve)`)
      assert.ok(service.stop_grace_period !== undefined, `${name} has no stop_grace_period`)
    }
    for (const name of ['postgres', 'redis']) assert.ok(services[name]!.healthcheck?.test.length, `${name} has no health check`)
    // Each instance on a port of its own, on this machine only unless ORDERS_BIND says otherwise.
    assert.deepEqual(['orders-1', 'orders-2'].map((name) => services[name]!.ports?.map(portText)), [['127.0.0.1:8081:8080'], ['127.0.0.1:8082:8080']])
    assert.deepEqual(services.jaeger!.profiles, ['tracing'])
    // Tracing is off until .env names the collector: an empty endpoint turns nothing on.
    assert.equal(services['orders-1']!.environment!.OTEL_EXPORTER_OTLP_ENDPOINT, '')
  })
})

describe('compose.yaml\'s migration and two instances, run as containers', { skip: composeSkip || containerSkipReason() }, () => {
  const engine = containerEngine() as Engine
  const run = randomBytes(4).toString('hex')
  const containers: string[] = []
  let database: TestDatabase | undefined
  let reason: string | undefined
  let image: string
  before(async () => {
    reason = (await postgresSkipReason()) ?? (await redisSkipReason())
    if (reason !== undefined) return
    image = await ensureImage(engine)
    database = await createTestDatabase()
  }, { timeout: 40 * 60_000 })
  after(async () => {
    for (const container of containers) await engine.run(['rm', '--force', '--time', '0', container])
    await database?.drop()
  })

  /** The service's environment as compose resolves it, its database and Redis those of this test. */
  function environment(service: Service, port?: number): string[] {
    const env: Record<string, string> = {}
    for (const [name, value] of Object.entries(service.environment ?? {})) env[name] = value ?? ''
    assert.match(env.DATABASE_URL!, /^postgres:\/\/petstore:[^@]+@postgres:5432\/petstore$/)
    assert.match(env.REDIS_URL!, /^redis:\/\/:[^@]+@redis:6379$/)
    env.DATABASE_URL = database!.url
    env.REDIS_URL = REDIS_URL
    // Host networking (the test's PostgreSQL and Redis listen on loopback only): the port compose
    // would publish becomes the port the instance listens on.
    if (port !== undefined) env.PORT = String(port)
    return Object.entries(env).flatMap(([name, value]) => ['--env', `${name}=${value}`])
  }

  it('serve the same orders and the same event feed, whichever instance is asked', async (t) => {
    if (reason !== undefined) return t.skip(reason)
    const services = await resolved()
    assert.equal(services.migrate!.image, 'petstore-orders:latest')
    const migrate = await engine.run(['run', '--rm', ...engine.runArgs, '--network', 'host', ...environment(services.migrate!), image, ...services.migrate!.command!])
    assert.equal(migrate.code, 0, migrate.stderr)
    assert.match(migrate.stdout, /applied migration/)

    const instances: { name: string; origin: string }[] = []
    for (const service of ['orders-1', 'orders-2']) {
      const port = await freePort()
      const name = `petstore-compose-${run}-${service}`
      containers.push(name)
      await engine.ok(['run', '--detach', '--name', name, ...engine.runArgs, '--network', 'host', ...environment(services[service]!, port), image])
      const origin = `http://127.0.0.1:${port}`
      await waitForHttp(engine, name, `${origin}/readyz`)
      instances.push({ name, origin })
    }
    const [one, two] = instances as [{ name: string; origin: string }, { name: string; origin: string }]
    const key = (await engine.ok(['exec', one.name, 'petstore-orders', 'keys', 'create', '--name', 'compose', '--scopes', 'orders:read,orders:write,orders:cancel'])).trim()
    const auth = { authorization: `Bearer ${key}` }

    const placed = await place(one.origin, key, '{"petId":9,"quantity":3}')
    assert.equal(placed.status, 201, placed.text)
    assert.equal((await fetch(`${two.origin}/v2/store/orders/${placed.body.id}`, { headers: auth })).status, 200)
    assert.equal((await fetch(`${two.origin}/v1/store/orders/${placed.body.id}`, { method: 'DELETE', headers: auth })).status, 204)
    assert.equal((await fetch(`${one.origin}/v1/store/orders/${placed.body.id}`, { method: 'DELETE', headers: auth })).status, 404)

    const feed = async (origin: string): Promise<string> => (await fetch(`${origin}/v2/store/order-events`, { headers: auth })).text()
    const [fromOne, fromTwo] = [await feed(one.origin), await feed(two.origin)]
    assert.equal(fromOne, fromTwo)
    assert.deepEqual((JSON.parse(fromOne) as { data: { type: string }[] }).data.map((event) => event.type), ['order.created', 'order.cancelled'])
  })
})
