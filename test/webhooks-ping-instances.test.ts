import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import pg from 'pg'
import { generateApiKey } from '../src/domain/api-keys.js'
import type { WebhookEndpoint } from '../src/domain/webhooks.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { PING_CLAIM_MARGIN_MS } from '../src/webhooks/ping.js'
import { assertOneLineError, cli } from './support/cli.js'
import { bearer, createDatabase, forEachStore, within, type TestDatabaseHandle } from './support/harness.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'
import { receiver, type Receiver } from './support/webhook-receiver.js'

// One ping per endpoint in flight, across `serve` processes on one database and the CLI: the claim
// lives in the database, and a claim left by a process that died expires with its delivery's time.
forEachStore('webhook pings across instances', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let key: string
  const processes: ServerProcess[] = []
  const receivers: Receiver[] = []

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    const created = generateApiKey()
    await store.apiKeys.create({ name: 'pings', hash: created.hash, displayPrefix: created.displayPrefix, scopes: ['webhooks:manage'], expiresAt: null })
    key = created.secret
  })
  after(async () => {
    for (const child of processes) {
      if (child.child.exitCode === null && child.child.signalCode === null) {
        child.child.kill('SIGTERM')
        await child.exited
      }
    }
    for (const receiving of receivers) await receiving.close()
    await store.close()
    await database.dispose()
  })

  async function serveProcess(env: Record<string, string> = {}): Promise<ServerProcess> {
    const child = await spawnServer(database.url, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', ...env })
    processes.push(child)
    return child
  }

  async function endpointWithReceiver(): Promise<{ endpoint: WebhookEndpoint; hook: Receiver }> {
    const hook = await receiver()
    receivers.push(hook)
    const endpoint = await store.webhooks.create({ url: hook.url, eventTypes: ['order.created'], description: null, secret: `whsec_${randomBytes(32).toString('base64')}` }, 100)
    assert.notEqual(endpoint, 'too_many')
    return { endpoint: endpoint as WebhookEndpoint, hook }
  }

  async function ping(server: ServerProcess, id: bigint): Promise<{ status: number; text: string }> {
    const response = await fetch(`${server.origin}/v2/webhook-endpoints/${id}/ping`, { method: 'POST', headers: bearer(key) })
    return { status: response.status, text: await response.text() }
  }

  /** claimed_until of the endpoint's ping claim, read with SQL (undefined: no claim). */
  async function claimedUntil(id: bigint): Promise<number | undefined> {
    if (database.config.kind === 'sqlite') {
      const db = new Database(database.config.path, { readonly: true })
      try {
        const until = db.prepare('SELECT claimed_until FROM webhook_ping_claims WHERE endpoint_id = ?').pluck().get(id) as string | undefined
        return until === undefined ? undefined : Date.parse(until)
      } finally {
        db.close()
      }
    }
    const client = new pg.Client({ connectionString: database.config.url })
    await client.connect()
    try {
      const { rows } = await client.query<{ until: Date }>('SELECT claimed_until AS until FROM webhook_ping_claims WHERE endpoint_id = $1', [String(id)])
      return rows[0]?.until.getTime()
    } finally {
      await client.end()
    }
  }

  it('two pings at once, one on each of two instances: one is sent (200), the other answered 409 ping_in_flight, sending nothing', async () => {
    const [first, second] = await Promise.all([serveProcess(), serveProcess()])
    const { endpoint, hook } = await endpointWithReceiver()
    // The receiver holds each ping until one of the two has been answered: both in flight at once
    // would have to be answered here first, and would both arrive.
    let answered!: () => void
    const oneAnswered = new Promise<void>((resolve) => (answered = resolve))
    hook.answer = (_delivery, _req, res) => {
      if (hook.deliveries.length > 1) answered()
      void oneAnswered.then(() => res.writeHead(204).end())
    }
    const answers = await Promise.all([first, second].map((server) => ping(server, endpoint.id).finally(answered)))
    const byStatus = answers.map((answer) => answer.status).sort()
    assert.deepEqual(byStatus, [200, 409], JSON.stringify(answers))
    const refused = JSON.parse(answers.find((answer) => answer.status === 409)!.text) as Record<string, unknown>
    assert.deepEqual(Object.keys(refused).sort(), ['code', 'message', 'status'])
    assert.deepEqual([refused.code, refused.status], ['ping_in_flight', 409])
    assert.equal(hook.deliveries.length, 1, 'only the ping that was answered 200 was sent')
    assert.equal(await claimedUntil(endpoint.id), undefined, 'the claim is released once the ping is answered')

    // Released: the next ping, on either instance, goes.
    hook.answer = (_delivery, _req, res) => res.writeHead(204).end()
    for (const server of [second, first]) assert.equal((await ping(server, endpoint.id)).status, 200)
    assert.equal(hook.deliveries.length, 3)
  })

  it("the CLI's ping while a server's is in flight: one line, exit 1, nothing sent", async () => {
    const [server] = processes.length > 0 ? processes : [await serveProcess()]
    const { endpoint, hook } = await endpointWithReceiver()
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    hook.answer = (_delivery, _req, res) => void released.then(() => res.writeHead(204).end())
    const held = ping(server!, endpoint.id)
    try {
      await within(60_000, "the server's ping at the receiver", () => hook.deliveries.length === 1, 10)
      const result = await cli(['webhooks', 'ping', String(endpoint.id)], { DATABASE_URL: database.url, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
      assertOneLineError(result, 1, /a ping to this webhook endpoint is still in flight/)
      assert.equal(hook.deliveries.length, 1)
    } finally {
      release()
    }
    assert.equal((await held).status, 200)
  })

  it('a claim left by an instance killed mid-ping holds until its time, its delivery timeout and a margin after it was taken, then is taken over', async () => {
    const TIMEOUT_MS = 4000
    const dying = await serveProcess({ WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) })
    const survivor = await serveProcess()
    const { endpoint, hook } = await endpointWithReceiver()
    hook.answer = () => {} // never answered: the ping is in flight when its instance dies
    const sentAt = Date.now()
    const lost = ping(dying, endpoint.id).catch(() => undefined)
    await within(60_000, "the dying instance's ping at the receiver", () => hook.deliveries.length === 1, 10)
    const reachedAt = Date.now()
    dying.child.kill('SIGKILL')
    await dying.exited
    await lost

    const until = await claimedUntil(endpoint.id)
    assert.ok(until !== undefined, 'the dead instance left its claim')
    // Taken between the request and the delivery's arrival: bounded by the timeout, from either side.
    assert.ok(until >= sentAt + TIMEOUT_MS + PING_CLAIM_MARGIN_MS - 1, `claimed until ${until - sentAt} ms after the ping was sent`)
    assert.ok(until <= reachedAt + TIMEOUT_MS + PING_CLAIM_MARGIN_MS, `claimed until ${until - reachedAt} ms after the ping arrived`)

    // Until then every ping is refused (without a word to the receiver); from then on, one goes.
    hook.answer = (_delivery, _req, res) => res.writeHead(204).end()
    for (;;) {
      const askedAt = Date.now()
      const answer = await ping(survivor, endpoint.id)
      if (answer.status === 200) {
        assert.ok(Date.now() >= until, `a ping went ${until - Date.now()} ms before the dead claim's time was over`)
        break
      }
      assert.equal(answer.status, 409, answer.text)
      assert.equal((JSON.parse(answer.text) as { code: string }).code, 'ping_in_flight')
      assert.ok(askedAt < until, `refused ${askedAt - until} ms after the dead claim's time was over`)
      assert.equal(hook.deliveries.length, 1, 'a refused ping sends nothing')
      await sleep(100)
    }
    assert.equal(hook.deliveries.length, 2)
    assert.equal(await claimedUntil(endpoint.id), undefined, 'the claim taken over is released once answered')
  })
})
