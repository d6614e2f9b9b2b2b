import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { assertOk, assertOneLineError, cli } from './support/cli.js'
import { createDatabase, forEachStore, records, order, type TestDatabaseHandle } from './support/harness.js'
import { receiver } from './support/webhook-receiver.js'

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/
const PUBLIC_URL = 'https://93.184.215.14/hooks'

forEachStore('petstore-orders webhooks', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let env: Record<string, string>

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    env = { DATABASE_URL: database.url, WEBHOOK_MAX_ENDPOINTS: '3' }
  })
  after(async () => {
    await store?.close()
    await database?.dispose()
  })

  async function removeAll(): Promise<void> {
    for (const endpoint of await store.webhooks.list()) await store.webhooks.remove(endpoint.id)
  }

  it('adds an endpoint: the secret alone on stdout, the id on stderr; every type by default', async () => {
    await removeAll()
    const result = await cli(['webhooks', 'add', PUBLIC_URL, '--description', 'Warehouse'], env)
    assertOk(result)
    assert.match(result.stdout, /^whsec_[A-Za-z0-9+/]{43}=\n$/)
    const [endpoint] = await store.webhooks.list()
    assert.ok(endpoint !== undefined)
    assert.match(result.stderr, new RegExp(`created webhook endpoint ${endpoint.id} for ${PUBLIC_URL.replace(/\./g, '\\.')}`))
    assert.equal(endpoint.url, PUBLIC_URL)
    assert.equal(endpoint.description, 'Warehouse')
    assert.deepEqual(endpoint.eventTypes, ['order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled'])
    assert.doesNotMatch(result.stderr, /whsec_/, 'the secret is on stdout only')
  })

  it('adds with --events (feed order, each once) and --json (the endpoint and its secret, ids exact)', async () => {
    await removeAll()
    const result = await cli(['webhooks', 'add', PUBLIC_URL, '--events', 'order.cancelled,order.shipped', '--json'], env)
    assertOk(result)
    const shown = JSON.parse(result.stdout.replace(/"id":([0-9]+)/, '"id":"$1"')) as { id: string; eventTypes: string[]; secret: string; status: string }
    assert.deepEqual(shown.eventTypes, ['order.shipped', 'order.cancelled'])
    assert.match(shown.secret, SECRET)
    assert.equal(shown.status, 'enabled')
    const [endpoint] = await store.webhooks.list()
    assert.equal(shown.id, String(endpoint!.id))
  })

  it('lists endpoints: tab-separated when piped, --json as the API shows them, never a secret', async () => {
    await removeAll()
    assertOk(await cli(['webhooks', 'add', PUBLIC_URL], env))
    assertOk(await cli(['webhooks', 'add', `${PUBLIC_URL}/2`, '--events', 'order.shipped'], env))
    const [first, second] = await store.webhooks.list()
    await store.webhooks.update(second!.id, { enabled: false })
    const piped = await cli(['webhooks', 'list'], env)
    assertOk(piped)
    const rows = piped.stdout.trimEnd().split('\n').map((line) => line.split('\t'))
    assert.equal(rows.length, 2)
    assert.deepEqual(rows[0]!.slice(0, 5), [String(first!.id), 'enabled', PUBLIC_URL, 'all', String(first!.position)])
    assert.deepEqual(rows[1]!.slice(0, 4), [String(second!.id), 'disabled:disabled_by_request', `${PUBLIC_URL}/2`, 'order.shipped'])
    const json = await cli(['webhooks', 'list', '--json'], env)
    assertOk(json)
    assert.match(json.stdout, new RegExp(`^\\[\\{"id":${first!.id},`))
    const listed = JSON.parse(json.stdout) as { url: string; status: string; disabledReason?: string; position: string }[]
    assert.deepEqual(listed.map((endpoint) => endpoint.url), [PUBLIC_URL, `${PUBLIC_URL}/2`])
    assert.equal(listed[1]!.disabledReason, 'disabled_by_request')
    assert.equal(listed[0]!.position, String(first!.position))
    for (const text of [piped.stdout, json.stdout, piped.stderr, json.stderr]) assert.doesNotMatch(text, /whsec_|secret/)
  })

  it('removes an endpoint; an unknown or malformed id fails with one line', async () => {
    await removeAll()
    assertOk(await cli(['webhooks', 'add', PUBLIC_URL], env))
    const [endpoint] = await store.webhooks.list()
    const removed = await cli(['webhooks', 'remove', String(endpoint!.id)], env)
    assertOk(removed)
    assert.equal(removed.stdout, `removed webhook endpoint ${endpoint!.id}\n`)
    assert.deepEqual(await store.webhooks.list(), [])
    assertOneLineError(await cli(['webhooks', 'remove', String(endpoint!.id)], env), 1, new RegExp(`no webhook endpoint has the id ${endpoint!.id}`))
    assertOneLineError(await cli(['webhooks', 'remove', 'seven'], env), 2, /ID must be an endpoint id/)
    assertOneLineError(await cli(['webhooks', 'remove', '9223372036854775808'], env), 2, /ID must be an endpoint id/)
  })

  it('replays an endpoint from a cursor, enabling it; refuses a cursor past the end, a malformed one, or none', async () => {
    await removeAll()
    await store.orders.import(records([order({ id: 1n }), order({ id: 2n })]))
    assertOk(await cli(['webhooks', 'add', PUBLIC_URL], env))
    const [endpoint] = await store.webhooks.list()
    await store.webhooks.update(endpoint!.id, { enabled: false })
    const replayed = await cli(['webhooks', 'replay', String(endpoint!.id), '--after', '1'], env)
    assertOk(replayed)
    assert.match(replayed.stdout, /replays the events after 1\n$/)
    const after = await store.webhooks.find(endpoint!.id)
    assert.equal(after!.position, 1n)
    assert.equal(after!.enabled, true)
    assertOneLineError(await cli(['webhooks', 'replay', String(endpoint!.id), '--after', '999999999'], env), 1, /past the end of the event feed/)
    assertOneLineError(await cli(['webhooks', 'replay', String(endpoint!.id), '--after', 'abc'], env), 2, /--after must be/)
    assertOneLineError(await cli(['webhooks', 'replay', String(endpoint!.id)], env), 2, /missing --after/)
    assertOneLineError(await cli(['webhooks', 'replay', '424242', '--after', '1'], env), 1, /no webhook endpoint has the id 424242/)
    assert.equal((await store.webhooks.find(endpoint!.id))!.position, 1n, 'a refused replay changes nothing')
  })

  it('applies the URL policy and the cap of the API: one line, exit 1, nothing written', async () => {
    await removeAll()
    const refused: [string, RegExp][] = [
      ['http://93.184.215.14/', /must use https/],
      ['https://127.0.0.1/', /private or reserved/],
      ['https://10.0.0.1/', /private or reserved/],
      ['https://169.254.169.254/', /private or reserved/],
      ['https://[fd00::1]/', /private or reserved/],
      ['https://user:pw@93.184.215.14/', /user name or password/],
      ['nonsense', /not an absolute URL/],
    ]
    for (const [url, problem] of refused) assertOneLineError(await cli(['webhooks', 'add', url], env), 1, problem)
    assert.deepEqual(await store.webhooks.list(), [])
    assertOk(await cli(['webhooks', 'add', 'http://127.0.0.1:9/hooks'], { ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }))

    assertOk(await cli(['webhooks', 'add', PUBLIC_URL], env))
    assertOk(await cli(['webhooks', 'add', PUBLIC_URL], env))
    assertOneLineError(await cli(['webhooks', 'add', PUBLIC_URL], env), 1, /3 webhook endpoints exist.*WEBHOOK_MAX_ENDPOINTS/)
    assert.equal((await store.webhooks.list()).length, 3)
  })

  it('refuses a bad command line with exit 2 before opening the database', async () => {
    assertOneLineError(await cli(['webhooks', 'add', PUBLIC_URL, '--events', 'order.lost'], env), 2, /unknown event type "order\.lost"/)
    assertOneLineError(await cli(['webhooks', 'add', PUBLIC_URL, '--events', 'order.shipped,order.shipped'], env), 2, /more than once/)
    assertOneLineError(await cli(['webhooks', 'add', PUBLIC_URL, '--description', 'x'.repeat(257)], env), 2, /at most 256/)
    assertOneLineError(await cli(['webhooks', 'add'], env), 2, /missing URL/)
    assertOneLineError(await cli(['webhooks', 'add', PUBLIC_URL], { ...env, WEBHOOK_MAX_ENDPOINTS: '0' }), 1, /WEBHOOK_MAX_ENDPOINTS/)
  })

  it('pings an endpoint: one signed webhook.ping, its answer printed, exit 0 whatever the receiver answered; the endpoint is left as it was', async () => {
    await removeAll()
    const hook = await receiver()
    try {
      const open = { ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }
      const added = await cli(['webhooks', 'add', hook.url], open)
      assertOk(added)
      const secret = added.stdout.trim()
      const [endpoint] = await store.webhooks.list()
      await store.orders.import(records([order({ id: 50n })])) // an event after its position, which a ping does not send
      const id = String(endpoint!.id)

      const pinged = await cli(['webhooks', 'ping', id], open)
      assertOk(pinged)
      assert.match(pinged.stdout, new RegExp(`^webhook endpoint ${id} answered 200 in [0-9]+ ms\\n$`))
      assert.equal(hook.deliveries.length, 1)
      const [delivery] = hook.deliveries
      assert.match(delivery!.id, /^ping_[0-9a-f]{24}$/)
      const payload = new Webhook(secret).verify(delivery!.body, delivery!.headers) as { type: string; data: unknown }
      assert.deepEqual([payload.type, payload.data], ['webhook.ping', { endpointId: id }])

      hook.answer = (_delivery, _req, res) => res.writeHead(500).end()
      const failed = await cli(['webhooks', 'ping', id], open)
      assertOk(failed)
      assert.match(failed.stdout, new RegExp(`^webhook endpoint ${id} did not answer with a 2xx: status 500 in [0-9]+ ms\\n$`))
      const json = await cli(['webhooks', 'ping', id, '--json'], open)
      assertOk(json)
      const result = JSON.parse(json.stdout) as { status?: number; error?: string; durationMs: number }
      assert.deepEqual([Object.keys(result).sort(), result.status, result.error], [['durationMs', 'error', 'status'], 500, 'status 500'])

      // The URL policy of the server's deliveries: a loopback address is not reached without the setting.
      const refused = await cli(['webhooks', 'ping', id, '--json'], env)
      assertOk(refused)
      assert.deepEqual(Object.keys(JSON.parse(refused.stdout) as object).sort(), ['durationMs', 'error'])
      assert.equal(hook.deliveries.length, 3)
      assert.deepEqual(await store.webhooks.find(endpoint!.id), endpoint, 'position, status and failures unchanged')
      assert.deepEqual(await store.webhooks.attempts(endpoint!.id, 100), [], 'a ping is not an attempt')

      assertOneLineError(await cli(['webhooks', 'ping', '424242'], open), 1, /no webhook endpoint has the id 424242/)
      assertOneLineError(await cli(['webhooks', 'ping', 'x'], open), 2, /ID must be an endpoint id/)
    } finally {
      await hook.close()
    }
  })

  it('shows attempts newest first: tab-separated when piped, --limit, --json as the API shows them', async () => {
    await removeAll()
    await store.orders.import(records([order({ id: 60n })]))
    assertOk(await cli(['webhooks', 'add', PUBLIC_URL], env))
    const [endpoint] = await store.webhooks.list()
    const id = String(endpoint!.id)
    const none = await cli(['webhooks', 'attempts', id], env)
    assertOk(none)
    assert.equal(none.stdout, '')
    await store.webhooks.replay(endpoint!.id, 0n) // the events ahead of it: the store leases it
    for (let i = 0; i < 3; i++) {
      const [lease] = (await store.webhooks.lease('test', new Date(), 30_000, 10)).filter((leased) => leased.endpoint.id === endpoint!.id)
      assert.ok(lease !== undefined)
      const attempt = { eventId: 1n, attemptedAt: new Date(Date.UTC(2026, 10, 20, 8, 0, i)).toISOString(), status: i === 0 ? null : 500 + i, error: i === 0 ? 'timeout' : `status ${500 + i}`, durationMs: 10 + i }
      assert.equal(await store.webhooks.fail(lease, attempt, { retryAt: new Date(0) }), true)
    }
    const piped = await cli(['webhooks', 'attempts', id], env)
    assertOk(piped)
    assert.deepEqual(piped.stdout.trimEnd().split('\n').map((line) => line.split('\t')), [
      ['2026-11-20T08:00:02.000Z', '1', '502', 'status 502', '12'],
      ['2026-11-20T08:00:01.000Z', '1', '501', 'status 501', '11'],
      ['2026-11-20T08:00:00.000Z', '1', '-', 'timeout', '10'],
    ])
    const limited = await cli(['webhooks', 'attempts', id, '--limit', '1', '--json'], env)
    assertOk(limited)
    assert.deepEqual(JSON.parse(limited.stdout), [{ eventId: '1', attemptedAt: '2026-11-20T08:00:02.000Z', status: 502, error: 'status 502', durationMs: 12 }])
    const oldest = JSON.parse((await cli(['webhooks', 'attempts', id, '--json'], env)).stdout) as { error?: string; status?: number }[]
    assert.deepEqual([oldest.length, oldest[2]!.error, oldest[2]!.status], [3, 'timeout', undefined])
    for (const limit of ['0', '101', 'x', '1.5']) assertOneLineError(await cli(['webhooks', 'attempts', id, '--limit', limit], env), 2, /--limit must be an integer from 1 to 100/)
    assertOneLineError(await cli(['webhooks', 'attempts', '424242'], env), 1, /no webhook endpoint has the id 424242/)
  })

  it('rotates the secret: the new one alone on stdout; the old one signs for a day', async () => {
    await removeAll()
    const added = await cli(['webhooks', 'add', PUBLIC_URL], env)
    const [endpoint] = await store.webhooks.list()
    const rotated = await cli(['webhooks', 'rotate', String(endpoint!.id)], env)
    assertOk(rotated)
    assert.match(rotated.stdout, /^whsec_[A-Za-z0-9+/]{43}=\n$/)
    assert.doesNotMatch(rotated.stderr, /whsec_/, 'the secret is on stdout only')
    const secrets = await store.webhooks.signingSecrets(endpoint!.id, new Date())
    assert.equal(secrets!.current, rotated.stdout.trim())
    assert.equal(secrets!.previous, added.stdout.trim())
    const until = Date.parse(secrets!.previousUntil!) - Date.now()
    assert.ok(until > 23 * 3_600_000 && until <= 24 * 3_600_000, secrets!.previousUntil!)
    assertOneLineError(await cli(['webhooks', 'rotate', '424242'], env), 1, /no webhook endpoint has the id 424242/)
  })

  it('disables an endpoint (disabled_by_request, its position kept) and enables it again', async () => {
    await removeAll()
    assertOk(await cli(['webhooks', 'add', PUBLIC_URL], env))
    const [endpoint] = await store.webhooks.list()
    const id = String(endpoint!.id)
    const disabled = await cli(['webhooks', 'disable', id], env)
    assertOk(disabled)
    assert.equal(disabled.stdout, `webhook endpoint ${id} disabled, at position ${endpoint!.position}\n`)
    const off = await store.webhooks.find(endpoint!.id)
    assert.deepEqual([off!.enabled, off!.disabledReason, off!.position], [false, 'disabled_by_request', endpoint!.position])
    const enabled = await cli(['webhooks', 'enable', id], env)
    assertOk(enabled)
    assert.equal(enabled.stdout, `webhook endpoint ${id} enabled, at position ${endpoint!.position}\n`)
    assert.deepEqual(await store.webhooks.find(endpoint!.id), endpoint, 'as it was before')
    assertOk(await cli(['webhooks', 'enable', id], env))
    for (const verb of ['enable', 'disable']) {
      assertOneLineError(await cli(['webhooks', verb, '424242'], env), 1, /no webhook endpoint has the id 424242/)
      assertOneLineError(await cli(['webhooks', verb], env), 2, /missing ID/)
    }
  })
})

describe('petstore-orders webhooks: help', () => {
  const env = { DATABASE_URL: 'sqlite:/nonexistent/never.db' }

  it('lists every webhooks command; each has --help with its usage and an example', async () => {
    const group = await cli(['webhooks', '--help'], env)
    assertOk(group)
    const commands = ['add', 'list', 'remove', 'replay', 'ping', 'attempts', 'rotate', 'enable', 'disable']
    for (const command of commands) {
      assert.ok(group.stdout.includes(`  webhooks ${command}`), `webhooks ${command} missing from the group's help`)
      const help = await cli(['webhooks', command, '--help'], env)
      assertOk(help)
      assert.ok(help.stdout.startsWith(`Usage: petstore-orders webhooks ${command}`), help.stdout.slice(0, 80))
      assert.ok((help.stdout.split('Examples:\n')[1] ?? '').includes(`petstore-orders webhooks ${command}`), `webhooks ${command} --help has no example`)
    }
    assert.match((await cli(['webhooks', 'ping', '--help'], env)).stdout, /Exit status 0 once the ping was sent, whatever the receiver answered/)
  })
})
