import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { assertOk, assertOneLineError, cli } from './support/cli.js'
import { createDatabase, forEachStore, records, order, type TestDatabaseHandle } from './support/harness.js'

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
})
