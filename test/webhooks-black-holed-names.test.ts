import assert from 'node:assert/strict'
import { after, before, it, type TestContext } from 'node:test'
import { generateApiKey } from '../src/domain/api-keys.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { LOOKUP_TIMEOUT_MS } from '../src/webhooks/resolve-host.js'
import { dnsServer, type DnsServer } from './support/dns-server.js'
import { createDatabase, forEachStore, within, type StoreKind, type TestDatabaseHandle } from './support/harness.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'
import { receiver, type Receiver } from './support/webhook-receiver.js'

// A host name that never resolves costs only its own endpoint. A real `serve` per store resolves
// names with a DNS server of the test's (WEBHOOK_DNS_SERVERS) that answers some names and drops
// every query for others, as a black-holed domain's servers do. Ten endpoints at dropped names are
// pinged without pause, each ping answered when its lookup times out, and delivered to without
// pause, each attempt retried 100 ms after its lookup timed out; meanwhile a healthy endpoint named
// by a host name is sent events, and an endpoint at a good name is created.

const BLACK_HOLED = 10
const EVENTS = 8
const PUBLIC_ADDRESS = '93.184.215.14'
// Every attempt to a black-holed endpoint fails: 50 retries, 100 ms apart, outlast the test.
const RETRY_SCHEDULE = Array.from({ length: 50 }, () => '100ms').join(',')

interface Instance {
  store: Store
  server: ServerProcess
  api(method: string, path: string, body?: object): Promise<{ status: number; text: string; ms: number }>
  close(): Promise<void>
}

/** A `serve` process on a new database of `kind`, its names resolved by `dns`, with a key that manages webhooks. */
async function instance(kind: StoreKind, dns: DnsServer, env: Record<string, string>): Promise<Instance> {
  const database: TestDatabaseHandle = await createDatabase(kind)
  const store = await openStore(database.config)
  await store.migrate()
  const key = generateApiKey()
  await store.apiKeys.create({ name: 'dns', hash: key.hash, displayPrefix: key.displayPrefix, scopes: ['orders:read', 'webhooks:manage'], expiresAt: null })
  const server = await spawnServer(database.url, { WEBHOOK_DNS_SERVERS: dns.address, WEBHOOK_RETRY_SCHEDULE: RETRY_SCHEDULE, ...env })
  return {
    store,
    server,
    async api(method, path, body) {
      const started = performance.now()
      const headers: Record<string, string> = { authorization: `Bearer ${key.secret}` }
      if (body !== undefined) headers['content-type'] = 'application/json'
      const response = await fetch(`${server.origin}/v2/webhook-endpoints${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
      const text = await response.text()
      return { status: response.status, text, ms: Math.round(performance.now() - started) }
    },
    async close() {
      server.child.kill('SIGTERM')
      await server.exited
      await store.close()
      await database.dispose()
    },
  }
}

async function createEndpoint(at: Instance, url: string): Promise<string> {
  const created = await at.api('POST', '', { url })
  assert.equal(created.status, 201, created.text)
  return /"id":"?(\d+)/.exec(created.text)![1]!
}

async function placeOrder(store: Store): Promise<void> {
  assert.equal((await store.orders.place({ order: { petId: 7n, quantity: 1, shipDate: null } })).outcome, 'placed')
}

/**
 * Pings each endpoint again as soon as its last ping is answered, until `stop()` (at the latest when
 * the test ends), which waits for the pings in flight and gives back every answer: the error each
 * ping reported, and how long it took.
 */
function pingWithoutPause(t: TestContext, at: Instance, ids: string[]): { answered: () => number[]; stop: () => Promise<{ error: string | undefined; durationMs: number }[]> } {
  let stopping = false
  const answers: { error: string | undefined; durationMs: number }[] = []
  const perEndpoint = ids.map(() => 0)
  const loops = Promise.all(
    ids.map(async (id, i) => {
      while (!stopping) {
        const ping = await at.api('POST', `/${id}/ping`)
        assert.equal(ping.status, 200, ping.text)
        answers.push(JSON.parse(ping.text) as { error: string | undefined; durationMs: number })
        perEndpoint[i]!++
      }
    }),
  )
  const stop = async (): Promise<typeof answers> => {
    stopping = true
    await loops
    return answers
  }
  t.after(() => stop().catch(() => {})) // a failed test's pings end before its server does
  return { answered: () => perEndpoint, stop }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

forEachStore('webhooks at host names that never resolve', (kind) => {
  let dns: DnsServer
  let lenient: Instance
  let strict: Instance

  before(async () => {
    dns = await dnsServer({ 'healthy.test': ['127.0.0.1'], 'good.test': [PUBLIC_ADDRESS] })
    for (let i = 0; i < BLACK_HOLED; i++) {
      dns.set(`gone-${i}.test`, 'drop')
      dns.set(`lost-${i}.test`, [PUBLIC_ADDRESS]) // resolves while its endpoint is created, then never
    }
    // A receiver on 127.0.0.1 needs private networks allowed; creation looks names up only without them.
    ;[lenient, strict] = await Promise.all([instance(kind, dns, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }), instance(kind, dns, {})])
  })
  after(async () => {
    await Promise.all([lenient?.close(), strict?.close()])
    await dns?.close()
  })

  it('a healthy endpoint at a host name gets every event at its first attempt, while ten black-holed endpoints are pinged and delivered to', async (t) => {
    const healthy: Receiver = await receiver()
    after(() => healthy.close())
    // Closing every connection: each delivery connects anew, so each looks its name up under the load.
    healthy.answer = (_delivery, _req, res) => res.setHeader('connection', 'close').end()
    const healthyId = await createEndpoint(lenient, `http://healthy.test:${new URL(healthy.url).port}/hook`)
    const goneIds: string[] = []
    for (let i = 0; i < BLACK_HOLED; i++) goneIds.push(await createEndpoint(lenient, `http://gone-${i}.test:9/hook`))
    const pings = pingWithoutPause(t, lenient, goneIds)
    await placeOrder(lenient.store) // the black-holed endpoints fail it, and try it again without end
    await within(60_000, 'every black-holed endpoint pinged once (its lookup timed out)', () => pings.answered().every((count) => count >= 1), 50)
    const warmUp = healthy.deliveries.length

    const delays: number[] = []
    for (let i = 0; i < EVENTS; i++) {
      const placed = performance.now()
      await placeOrder(lenient.store)
      let failed: (string | null)[] = []
      await within(60_000, `event ${i + 1} delivered, or an attempt of it failed`, async () => {
        failed = (await lenient.store.webhooks.attempts(BigInt(healthyId), 100))!.filter((attempt) => attempt.error !== null).map((attempt) => attempt.error)
        return failed.length > 0 || healthy.deliveries.length >= warmUp + i + 1
      }, 20)
      assert.deepEqual(failed, [], `event ${i + 1}: the healthy endpoint's attempts failed`)
      delays.push(Math.round(healthy.deliveries.at(-1)!.at - placed))
    }
    const answers = await pings.stop()

    const lookups = dns.asked.filter((question) => question === 'healthy.test A').length
    assert.ok(lookups >= warmUp + EVENTS, `every delivery looked the name up (${lookups} lookups)`)
    assert.ok(answers.length >= BLACK_HOLED && answers.every((answer) => answer.error === 'DNS timeout'), 'each ping of a black-holed endpoint timed out')
    const goneAttempts = (await Promise.all(goneIds.map((id) => lenient.store.webhooks.attempts(BigInt(id), 100)))).flatMap((attempts) => attempts!)
    assert.ok(goneAttempts.length >= BLACK_HOLED && goneAttempts.every((attempt) => attempt.error === 'DNS timeout'), 'each attempt to a black-holed endpoint timed out')
    t.diagnostic(`healthy endpoint: commit to delivery ${delays.join(', ')} ms (median ${median(delays)}, max ${Math.max(...delays)})`)
    t.diagnostic(
      `black-holed endpoints: ${answers.length} pings answered "DNS timeout" in a median ${median(answers.map((answer) => answer.durationMs))} ms; ` +
        `${goneAttempts.length} attempts failed "DNS timeout" in a median ${median(goneAttempts.map((attempt) => attempt.durationMs))} ms`,
    )
    // No event waited out a lookup of another name: that would take LOOKUP_TIMEOUT_MS at least.
    for (const delay of delays) assert.ok(delay < LOOKUP_TIMEOUT_MS, `an event took ${delay} ms from commit to delivery`)
  })

  it('an endpoint at a good name is created while ten black-holed endpoints are pinged and delivered to', async (t) => {
    const lostIds: string[] = []
    for (let i = 0; i < BLACK_HOLED; i++) lostIds.push(await createEndpoint(strict, `https://lost-${i}.test/hook`))
    for (let i = 0; i < BLACK_HOLED; i++) dns.set(`lost-${i}.test`, 'drop')
    const pings = pingWithoutPause(t, strict, lostIds)
    await placeOrder(strict.store)
    await within(60_000, 'every black-holed endpoint pinged once (its lookup timed out)', () => pings.answered().every((count) => count >= 1), 50)

    const creations: number[] = []
    for (let i = 0; i < EVENTS; i++) {
      const created = await strict.api('POST', '', { url: `https://good.test/hook-${i}` })
      assert.equal(created.status, 201, created.text)
      creations.push(created.ms)
    }
    const answers = await pings.stop()
    assert.ok(answers.every((answer) => answer.error === 'DNS timeout'), 'each ping of a black-holed endpoint timed out')
    t.diagnostic(`creations at good.test: ${creations.join(', ')} ms; pings of black-holed endpoints: a median ${median(answers.map((answer) => answer.durationMs))} ms`)
  })
})
