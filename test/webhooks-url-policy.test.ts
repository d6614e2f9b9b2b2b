import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { Deliverer, type DeliveryResult } from '../src/webhooks/delivery.js'
import { LOOKUP_TIMEOUT_MS } from '../src/webhooks/resolve-host.js'
import { assertOk, assertOneLineError, cli } from './support/cli.js'
import { dnsServer, type DnsServer } from './support/dns-server.js'
import { bearer, createDatabase, expectError, forEachStore, startTestServer, type TestDatabaseHandle, type TestServer } from './support/harness.js'
import { receiver, type Receiver } from './support/webhook-receiver.js'

// The URL policy through the real parts: the API on both stores, the CLI, and the Deliverer
// connecting to a receiver on 127.0.0.1, names resolved by a DNS server of the test's
// (WEBHOOK_DNS_SERVERS). The rules themselves are tested one by one in
// webhooks-delivery-url-policy.test.ts.

const PUBLIC_URL = 'https://93.184.215.14/hooks' // an address literal: no DNS needed to judge it
const SETTING = 'set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow private networks and http (tests, on-premises)'
const PRIVATE = `The webhook URL must not point to a private or reserved address; ${SETTING}.`
const HTTP = `The webhook URL must use https; ${SETTING}.`

// IPv4-compatible (::/96, written [::7f00:1], [::a9fe:a9fe] and [::808:808] by the URL parser) and
// the rest of ::/8, refused whatever IPv4 address they carry; then private, loopback, link-local
// and unique-local addresses, and http.
const REFUSED: [url: string, message: string][] = [
  ['https://[::127.0.0.1]/hooks', PRIVATE],
  ['https://[::a9fe:a9fe]/latest/meta-data', PRIVATE],
  ['https://[::169.254.169.254]/', PRIVATE],
  ['https://[::8.8.8.8]/', PRIVATE],
  ['https://[::1:2:3]/', PRIVATE],
  ['https://[1::1]:8443/hooks', PRIVATE],
  ['https://[::ffff:10.0.0.1]/', PRIVATE],
  ['https://[64:ff9b::c0a8:101]/', PRIVATE],
  ['https://10.1.2.3/', PRIVATE],
  ['https://[fe80::1]/', PRIVATE],
  ['https://[fd12:3456::1]/', PRIVATE],
  ['http://93.184.215.14/hooks', HTTP],
]

// The URL parser would drop the newline and the tab: what is stored would not be what is called.
const CHARACTERS = 'The webhook URL must not contain whitespace or control characters.'
const CONTROLS = ['https://93.184.215.14/ho\noks', 'https://93.184.2\t15.14/hooks', 'https://93.184.215.14/\u001b[2Jhooks', 'https://93.184.215.14/hooks\u0000', 'https://93.184.215.14/a hook']

// A name with a private address and a name with none get one message: it tells nothing of which names exist inside.
const NO_PUBLIC_ADDRESS = `The webhook URL has a host name that does not resolve to a public address; ${SETTING}.`

/** A DNS server for the names of these tests, closed when the file ends. */
let dns: DnsServer
before(async () => {
  dns = await dnsServer({ 'hooks.test': ['93.184.215.14'], 'internal.test': ['10.1.2.3'], 'loopback.test': ['127.0.0.1', '::1'] })
})
after(() => dns.close())

async function call(server: TestServer, key: string, method: string, path: string, body: object): Promise<Response> {
  return fetch(`${server.origin}/v2/webhook-endpoints${path}`, {
    method,
    headers: { ...bearer(key), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

/** The created endpoint's id and url, the id as the decimal text the response carries (never a number). */
async function created(response: Response): Promise<{ id: string; url: string }> {
  const text = await response.text()
  assert.equal(response.status, 201, text)
  const id = /"id":([0-9]+)/.exec(text)?.[1]
  assert.ok(id !== undefined, text)
  return { id, url: (JSON.parse(text) as { url: string }).url }
}

/** The message, which must name neither the host nor any form of the address it stands for. */
function assertNamesNoAddress(message: string, url: string): void {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '')
  assert.ok(!message.includes(host), `${message} names ${host}`)
  assert.doesNotMatch(message, /\d+\.\d+\.\d+\.\d+|::|7f00|a9fe/, message)
}

forEachStore('webhook URL policy through the API', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_DNS_SERVERS: dns.address } })
    key = await server.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
  })

  it('refuses ::/96, ::/8, private addresses and http at creation: 400 invalid_webhook_url naming the setting, never the address', async () => {
    for (const [url, message] of REFUSED) {
      const body = await expectError(await call(server, key, 'POST', '', { url }), 400, 'invalid_webhook_url')
      assert.equal(body.message, message, url)
      assertNamesNoAddress(body.message as string, url)
    }
    assert.deepEqual(await server.store.webhooks.list(), [], 'nothing was created')
  })

  it('answers a name with a private address and a name with none in the same words, naming the setting; a public name is created', async () => {
    for (const url of ['https://internal.test/hooks', 'https://loopback.test/hooks', 'https://localhost/hooks', 'https://nowhere.test/hooks']) {
      const body = await expectError(await call(server, key, 'POST', '', { url }), 400, 'invalid_webhook_url')
      assert.equal(body.message, NO_PUBLIC_ADDRESS, url)
    }
    assert.deepEqual(await server.store.webhooks.list(), [], 'nothing was created')
    const endpoint = await created(await call(server, key, 'POST', '', { url: 'https://hooks.test/hooks' }))
    assert.equal(endpoint.url, 'https://hooks.test/hooks')
    await server.store.webhooks.remove(BigInt(endpoint.id))
  })

  it('refuses a URL with whitespace or control characters at creation and in a PATCH: 400 invalid_webhook_url, nothing written', async () => {
    for (const url of CONTROLS) {
      const body = await expectError(await call(server, key, 'POST', '', { url }), 400, 'invalid_webhook_url')
      assert.equal(body.message, CHARACTERS, JSON.stringify(url))
    }
    assert.deepEqual(await server.store.webhooks.list(), [], 'nothing was created')
    const endpoint = await created(await call(server, key, 'POST', '', { url: PUBLIC_URL }))
    for (const url of CONTROLS) {
      const body = await expectError(await call(server, key, 'PATCH', `/${endpoint.id}`, { url }), 400, 'invalid_webhook_url')
      assert.equal(body.message, CHARACTERS, JSON.stringify(url))
    }
    assert.equal((await server.store.webhooks.find(BigInt(endpoint.id)))?.url, PUBLIC_URL)
    await server.store.webhooks.remove(BigInt(endpoint.id))
  })

  it('refuses them in a PATCH, which then changes nothing', async () => {
    const endpoint = await created(await call(server, key, 'POST', '', { url: PUBLIC_URL }))
    for (const [url, message] of REFUSED) {
      const body = await expectError(await call(server, key, 'PATCH', `/${endpoint.id}`, { url, description: 'moved' }), 400, 'invalid_webhook_url')
      assert.equal(body.message, message, url)
    }
    const [stored] = await server.store.webhooks.list()
    assert.equal(String(stored!.id), endpoint.id)
    assert.equal(stored!.url, PUBLIC_URL)
    assert.equal(stored!.description, null, 'a refused patch applies none of its fields')
    await server.store.webhooks.remove(stored!.id)
  })

  it('creates them with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true, the setting the refusal names', async () => {
    const lenient = await startTestServer(kind, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } })
    const lenientKey = await lenient.createKey({ scopes: ['orders:read', 'webhooks:manage'] })
    // Stored as the URL parser writes it, which is what is called: IPv6 in hex.
    for (const [url, stored] of [
      ['https://[::127.0.0.1]/hooks', 'https://[::7f00:1]/hooks'],
      ['https://[::1:2:3]/', 'https://[::1:2:3]/'],
      ['http://93.184.215.14/hooks', 'http://93.184.215.14/hooks'],
    ]) {
      const endpoint = await created(await call(lenient, lenientKey, 'POST', '', { url }))
      assert.equal(endpoint.url, stored)
      await lenient.store.webhooks.remove(BigInt(endpoint.id))
    }
  })
})

forEachStore('webhook URL policy through the CLI', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let env: Record<string, string>

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    env = { DATABASE_URL: database.url }
  })
  after(async () => {
    await store?.close()
    await database?.dispose()
  })

  it('webhooks add fails with the API message as its one line, naming the setting; with the setting it adds', async () => {
    for (const [url, message] of [REFUSED[0]!, REFUSED[4]!, REFUSED.at(-1)!]) {
      const result = await cli(['webhooks', 'add', url], env)
      assertOneLineError(result, 1, /webhook URL/)
      assert.equal(result.stderr, `petstore-orders: ${message.charAt(0).toLowerCase()}${message.slice(1)}\n`)
    }
    assert.deepEqual(await store.webhooks.list(), [])
    for (const url of ['https://internal.test/hooks', 'https://nowhere.test/hooks']) {
      const result = await cli(['webhooks', 'add', url], { ...env, WEBHOOK_DNS_SERVERS: dns.address })
      assertOneLineError(result, 1, /webhook URL/)
      assert.equal(result.stderr, `petstore-orders: ${NO_PUBLIC_ADDRESS.charAt(0).toLowerCase()}${NO_PUBLIC_ADDRESS.slice(1)}\n`, url)
    }
    // A command line cannot carry NUL.
    for (const url of CONTROLS.filter((control) => !control.includes('\u0000'))) {
      const result = await cli(['webhooks', 'add', url], env)
      assertOneLineError(result, 1, /webhook URL/)
      assert.equal(result.stderr, `petstore-orders: the webhook URL must not contain whitespace or control characters.\n`, JSON.stringify(url))
    }
    assert.deepEqual(await store.webhooks.list(), [])
    assertOk(await cli(['webhooks', 'add', 'https://[::127.0.0.1]/hooks'], { ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }))
    assert.deepEqual((await store.webhooks.list()).map((endpoint) => endpoint.url), ['https://[::7f00:1]/hooks'])
  })
})

describe('webhook URL policy when a delivery connects', () => {
  let hook: Receiver
  before(async () => {
    hook = await receiver()
  })
  after(() => hook.close())

  const port = (): string => new URL(hook.url).port
  const request = (url: string): { url: string; body: string; headers: Record<string, string> } => ({ url, body: '{}', headers: {} })
  const pick = (result: DeliveryResult): Pick<DeliveryResult, 'outcome' | 'status' | 'error'> => ({ outcome: result.outcome, status: result.status, error: result.error })

  function deliverer(): Deliverer {
    const value = new Deliverer({ timeoutMs: 60_000, allowPrivateNetworks: false, dnsServers: [dns.address] })
    after(() => value.close())
    return value
  }

  it('refuses a name that resolves into ::/96 or ::/8, without connecting', async () => {
    // ::7f00:1, ::808:808 and ::1:2:3 as AAAA records; c-ares writes the first two as ::127.0.0.1 and ::8.8.8.8.
    const records: Record<string, string> = { 'compatible.test': '::7f00:1', 'compatible-public.test': '::808:808', 'reserved.test': '::1:2:3' }
    for (const [host, address] of Object.entries(records)) dns.set(host, [address])
    for (const host of Object.keys(records)) {
      const result = await deliverer().deliver(request(`https://${host}:${port()}/hook`))
      assert.deepEqual(pick(result), { outcome: 'failure', status: null, error: 'address not allowed' }, host)
    }
    assert.equal(hook.deliveries.length, 0)
  })

  it('refuses a ::/96 or ::/8 literal, and http, without connecting', async () => {
    for (const host of ['[::127.0.0.1]', '[::1:2:3]']) {
      assert.deepEqual(pick(await deliverer().deliver(request(`https://${host}:${port()}/hook`))), { outcome: 'failure', status: null, error: 'address not allowed' })
    }
    assert.deepEqual(pick(await deliverer().deliver(request(hook.url))), { outcome: 'failure', status: null, error: 'URL not allowed' })
    assert.equal(hook.deliveries.length, 0)
  })

  it('fails an attempt whose lookup does not answer within the timeout with "DNS timeout"', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    dns.set('hangs.test', 'drop')
    const asked = (): number => dns.asked.filter((question) => question.startsWith('hangs.test ')).length
    const attempt = deliverer().deliver(request(`https://hangs.test:${port()}/hook`))
    while (asked() < 2) await new Promise((resolve) => setImmediate(resolve))
    t.mock.timers.tick(LOOKUP_TIMEOUT_MS)
    assert.deepEqual(pick(await attempt), { outcome: 'failure', status: null, error: 'DNS timeout' })
    assert.equal(hook.deliveries.length, 0)
  })
})
