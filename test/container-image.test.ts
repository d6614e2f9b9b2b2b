import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { containerEngine, containerSkipReason, ensureImage, healthStatus, waitForHttp, type Engine } from './support/containers.js'
import { place } from './support/place.js'
import { freePort } from './support/server-process.js'

// The container image, built from this tree by `npm run image` (once per test run), run as a user
// runs it: ports published on 127.0.0.1, the SQLite database in a named volume, the CLI through
// `exec`, and stopped by the engine's own stop and kill.

const skip = containerSkipReason()
const engine = containerEngine() as Engine
const run = randomBytes(4).toString('hex')
const containers: string[] = []
const volumes: string[] = []
let image: string

before(async () => {
  if (skip !== false) return
  image = await ensureImage(engine)
}, { timeout: 40 * 60_000 })

after(async () => {
  if (skip !== false) return
  for (const container of containers) await engine.run(['rm', '--force', '--time', '0', container])
  for (const volume of volumes) await engine.run(['volume', 'rm', '--force', volume])
})

/** A container of the image, detached, with its port 8080 published on 127.0.0.1; the args follow the image. */
async function start(options: { volume?: string; env?: Record<string, string>; args?: string[] } = {}): Promise<{ name: string; origin: string }> {
  const name = `petstore-test-${run}-${containers.length}`
  containers.push(name)
  const port = await freePort()
  const env = Object.entries(options.env ?? {}).flatMap(([key, value]) => ['--env', `${key}=${value}`])
  const volume = options.volume === undefined ? [] : ['--volume', `${options.volume}:/var/lib/petstore-orders`]
  await engine.ok(['run', '--detach', '--name', name, ...engine.runArgs, '--publish', `127.0.0.1:${port}:8080`, ...volume, ...env, image, ...(options.args ?? [])])
  const origin = `http://127.0.0.1:${port}`
  await waitForHttp(engine, name, `${origin}/healthz`)
  return { name, origin }
}

function volume(): string {
  const name = `petstore-test-${run}-data-${volumes.length}`
  volumes.push(name)
  return name
}

/** A key made by the CLI inside the container, as an operator would: `docker exec C petstore-orders keys create`. */
async function createKey(container: string, scopes = 'orders:read,orders:write,orders:cancel'): Promise<string> {
  return (await engine.ok(['exec', container, 'petstore-orders', 'keys', 'create', '--name', 'container-test', '--scopes', scopes])).trim()
}

async function getOrder(origin: string, key: string, id: string): Promise<number> {
  return (await fetch(`${origin}/v2/store/orders/${id}`, { headers: { authorization: `Bearer ${key}` } })).status
}

describe('the container image', { skip }, () => {
  it('is within 250 MB, runs as a user of its own under tini, and declares its port, volume, health check, stop signal and OCI labels', async () => {
    const [config] = JSON.parse(await engine.ok(['image', 'inspect', image])) as [
      {
        Size: number
        Config: { User: string; Entrypoint: string[]; Cmd: string[]; ExposedPorts: Record<string, unknown>; Volumes: Record<string, unknown>; StopSignal: string; Labels: Record<string, string>; Healthcheck?: { Test: string[] } }
        Healthcheck?: { Test: string[] } // where podman shows it
      },
    ]
    assert.ok(config.Size <= 250_000_000, `the image is ${(config.Size / 1e6).toFixed(1)} MB`)
    assert.equal(config.Config.User, '10001:10001')
    assert.deepEqual(config.Config.Entrypoint, ['/usr/bin/tini', '--', 'petstore-orders'])
    assert.deepEqual(config.Config.Cmd, ['serve'])
    assert.deepEqual(Object.keys(config.Config.ExposedPorts), ['8080/tcp'])
    assert.deepEqual(Object.keys(config.Config.Volumes), ['/var/lib/petstore-orders'])
    assert.equal(config.Config.StopSignal, 'SIGTERM')
    // Kept only in a Docker-format image: podman must build with --format docker.
    assert.deepEqual((config.Config.Healthcheck ?? config.Healthcheck)?.Test, ['CMD', 'petstore-orders', 'healthcheck'])
    const labels = config.Config.Labels
    assert.equal(labels['org.opencontainers.image.licenses'], 'MIT')
    assert.match(labels['org.opencontainers.image.version'] ?? '', /^\d+\.\d+\.\d+/)
    assert.ok(labels['org.opencontainers.image.source'], 'no source label')
    assert.ok(labels['org.opencontainers.image.revision'], 'no revision label')
  })

  it('holds no compiler, no npm, no development packages, no npm cache, no source maps and no authority of the build machine', async () => {
    const script = [
      'for tool in gcc g++ make python3 npm npx yarn corepack; do command -v "$tool" && echo "found $tool"; done',
      'for dir in /root/.npm /opt/petstore-orders/node_modules/typescript /opt/petstore-orders/node_modules/tsx /opt/petstore-orders/node_modules/eslint /opt/petstore-orders/src/store /usr/local/share/stand-in; do [ -e "$dir" ] && echo "found $dir"; done',
      // A build on stand-in base images trusts the build machine's authorities in its build stages only.
      '[ -n "${NODE_EXTRA_CA_CERTS:-}" ] && echo "found NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS"',
      'find /opt/petstore-orders -name "*.map" | head -3 | sed "s/^/found /"',
      'true',
    ].join('; ')
    const found = await engine.ok(['run', '--rm', ...engine.runArgs, '--user', '0', '--entrypoint', 'sh', image, '-c', script])
    assert.equal(found, '')
  })

  it('answers the API on its published port, keys made with `exec petstore-orders keys create`, every process not root', async () => {
    const { name, origin } = await start({ volume: volume() })
    const key = await createKey(name)
    const placed = await place(origin, key, '{"petId":7,"quantity":2}')
    assert.equal(placed.status, 201, placed.text)
    const list = await fetch(`${origin}/v1/store/orders`, { headers: { authorization: `Bearer ${key}` } })
    assert.equal(list.status, 200)
    assert.deepEqual((await list.json() as { petId: number }[]).map((order) => order.petId), [7])
    // Every process of the container (tini, node) and anything exec'd runs as the image's user.
    const uids = await engine.ok(['exec', name, 'sh', '-c', 'for status in /proc/[0-9]*/status; do sed -n "s/^Uid:\\t\\([0-9]*\\).*/\\1/p" "$status"; done'])
    assert.ok(uids.trim() !== '', 'no process found')
    assert.deepEqual([...new Set(uids.trim().split('\n'))], ['10001'])
    assert.equal((await engine.ok(['exec', name, 'cat', '/proc/1/comm'])).trim(), 'tini')
  })

  it('turns healthy through its HEALTHCHECK (petstore-orders healthcheck), with no curl in the image', async () => {
    const { name } = await start()
    if (engine.name === 'podman') {
      // podman schedules health checks with systemd timers, which a machine without systemd lacks:
      // the check the image declares is run here as podman's timer would run it.
      const check = await engine.run(['healthcheck', 'run', name])
      assert.equal(check.code, 0, check.stderr + check.stdout)
    }
    const deadline = Date.now() + 120_000 // docker runs the first check one interval (10 s) after the start
    let status = await healthStatus(engine, name)
    while (status !== 'healthy' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 500))
      status = await healthStatus(engine, name)
    }
    assert.equal(status, 'healthy')
    assert.equal((await engine.run(['exec', name, 'sh', '-c', 'command -v curl || command -v wget'])).stdout, '')
  })

  it('stops on the engine\'s stop (SIGTERM) with exit 0, well before the kill, and keeps every place it acknowledged', async () => {
    const data = volume()
    const { name, origin } = await start({ volume: data })
    const key = await createKey(name)
    // Places keep arriving while the stop is sent; each one answered 201 must be there afterwards.
    const acknowledged: string[] = []
    let stopping = false
    const clients = Array.from({ length: 8 }, async (_, client) => {
      for (let n = 0; !stopping || n < 3; n++) {
        try {
          const answer = await place(origin, key, `{"petId":${client + 1},"quantity":${n + 1}}`)
          if (answer.status === 201) acknowledged.push(answer.body.id)
        } catch {
          return // the server is gone: refused or cut off, never acknowledged
        }
      }
    })
    while (acknowledged.length < 20) await new Promise((resolve) => setTimeout(resolve, 20))
    stopping = true
    // A grace period far longer than a clean stop takes: a kill at its end would be exit 137.
    const stop = await engine.run(['stop', '--time', '120', name], { timeoutMs: 180_000 })
    assert.equal(stop.code, 0, stop.stderr)
    await Promise.all(clients)
    const state = JSON.parse(await engine.ok(['inspect', '--format', '{{json .State}}', name])) as { ExitCode: number; OOMKilled: boolean }
    assert.equal(state.ExitCode, 0, `exit ${state.ExitCode}: ${(await engine.run(['logs', name])).stdout}`)
    const logs = await engine.run(['logs', name])
    assert.match(logs.stdout, /"msg":"shutting down".*"signal":"SIGTERM"|"signal":"SIGTERM".*"msg":"shutting down"/)
    assert.match(logs.stdout, /"msg":"stopped"/)

    const again = await start({ volume: data })
    for (const id of acknowledged) assert.equal(await getOrder(again.origin, key, id), 200, `order ${id} was acknowledged and is gone`)
  })

  it('keeps an acknowledged place through a kill -9 of the container, the volume kept', async () => {
    const data = volume()
    const { name, origin } = await start({ volume: data })
    const key = await createKey(name)
    const placed = await place(origin, key, '{"petId":42,"quantity":1}')
    assert.equal(placed.status, 201, placed.text)
    await engine.ok(['kill', '--signal', 'KILL', name])
    const state = JSON.parse(await engine.ok(['inspect', '--format', '{{json .State}}', name])) as { Running: boolean }
    assert.equal(state.Running, false)

    const again = await start({ volume: data })
    assert.equal(await getOrder(again.origin, key, placed.body.id), 200)
  })
})
