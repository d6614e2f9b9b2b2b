import assert from 'node:assert/strict'
import { createSocket } from 'node:dgram'
import type { LookupAddress } from 'node:dns'
import { SocketAddress, type LookupFunction } from 'node:net'
import { after, before, describe, it } from 'node:test'
import ipaddr from 'ipaddr.js'
import { allowedWebhookUrl } from '../src/webhooks/endpoints.js'
import { ApiError } from '../src/errors.js'
import { LOOKUP_TIMED_OUT, LOOKUP_TIMEOUT_MS, resolveHost } from '../src/webhooks/resolve-host.js'
import { ADDRESS_NOT_ALLOWED, checkWebhookUrl, guardedLookup, isForbiddenAddress } from '../src/webhooks/url-policy.js'
import { dnsServer, type DnsServer } from './support/dns-server.js'

// A real DNS server on UDP 127.0.0.1 for the names these tests judge; names it drops never answer.
let dns: DnsServer
before(async () => {
  dns = await dnsServer({
    'hooks.example': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'rebind.example': ['93.184.215.14', '127.0.0.1'],
    'internal.example': ['10.1.2.3'],
    'mapped.example': ['::ffff:192.168.1.1'],
    // ::808:808, which c-ares writes ::8.8.8.8 (inet_ntop's form for ::/96).
    'compatible.example': ['93.184.215.14', '::808:808'],
    'reserved6.example': ['::1:2:3'],
    'v6only.example': ['2606:4700:4700::1111'],
    'noaddress.example': [],
    'half.example': { A: ['93.184.215.14'], AAAA: 'drop' },
    'slow.example': 'drop',
  })
})
after(() => dns.close())

const servers = (): string[] => [dns.address]

/**
 * Lets I/O and settled promises run until `done` holds, failing when it does not within a lookup's
 * deadline of real time (timers may be mocked: `performance.now` is not).
 */
async function until(done: () => boolean, what = 'the awaited lookups'): Promise<void> {
  const started = performance.now()
  while (!done()) {
    if (performance.now() - started > LOOKUP_TIMEOUT_MS) assert.fail(`${what}: not within ${LOOKUP_TIMEOUT_MS} ms`)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

/** Whether a lookup of the dropped `slow.example` has been asked of the DNS server `count` times (A and AAAA each). */
const slowAsked = (count: number) => (): boolean => dns.asked.filter((question) => question.startsWith('slow.example ')).length >= count

describe('resolveHost', () => {
  it("answers a name's A and AAAA records, IPv4 first", async () => {
    assert.deepEqual(await resolveHost('hooks.example', servers()), [
      { address: '93.184.215.14', family: 4 },
      { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
    ])
    assert.deepEqual(await resolveHost('v6only.example', servers()), [{ address: '2606:4700:4700::1111', family: 6 }])
  })

  it('answers localhost names with the loopback addresses, without asking DNS (RFC 6761)', async () => {
    const asked = dns.asked.length
    for (const name of ['localhost', 'LOCALHOST.', 'api.localhost']) {
      assert.deepEqual(await resolveHost(name, servers()), [
        { address: '127.0.0.1', family: 4 },
        { address: '::1', family: 6 },
      ], name)
    }
    assert.equal(dns.asked.length, asked)
  })

  it('fails with ENOTFOUND for a name that does not exist or has no address', async () => {
    for (const name of ['nowhere.example', 'noaddress.example']) {
      await assert.rejects(resolveHost(name, servers()), (error: NodeJS.ErrnoException) => error.code === 'ENOTFOUND', name)
    }
  })

  it('fails with EAI_AGAIN when the resolver fails otherwise: nothing listens where it is', async () => {
    const closed = createSocket('udp4')
    await new Promise<void>((resolve) => closed.bind(0, '127.0.0.1', resolve))
    const address = `127.0.0.1:${closed.address().port}`
    await new Promise<void>((resolve) => closed.close(resolve))
    await assert.rejects(resolveHost('hooks.example', [address]), (error: NodeJS.ErrnoException) => error.code === 'EAI_AGAIN')
  })

  it('fails with LOOKUP_TIMED_OUT, at its deadline, a name whose queries get no answer', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const asked = dns.asked.length
    let settled = false
    const lookup = resolveHost('slow.example', servers()).finally(() => (settled = true))
    await until(() => dns.asked.length >= asked + 2)
    t.mock.timers.tick(LOOKUP_TIMEOUT_MS - 1)
    await until(() => true)
    assert.equal(settled, false, 'not before the deadline')
    t.mock.timers.tick(1)
    await assert.rejects(lookup, (error: NodeJS.ErrnoException) => error.code === LOOKUP_TIMED_OUT)
  })

  // Real timers: the A answer must have come before the deadline, and nothing outside says when it has.
  it('uses the family that answered when the other gets no answer by the deadline', async () => {
    assert.deepEqual(await resolveHost('half.example', servers()), [{ address: '93.184.215.14', family: 4 }])
  })
})

describe('isForbiddenAddress', () => {
  for (const address of [
    '127.0.0.1', '127.255.0.9', '10.0.0.1', '172.16.5.4', '172.31.255.255', '192.168.0.1', '169.254.169.254',
    '100.64.0.1', '100.127.255.254', '0.0.0.0', '255.255.255.255', '224.0.0.1', '239.1.2.3', '192.0.2.10', '240.0.0.1',
    '::1', '::', 'fe80::1', 'fe80::1%eth0', 'fc00::1', 'fd12:3456::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1',
    '::ffff:169.254.169.254', '64:ff9b::a00:1', '2002:7f00:1::1', 'not an address',
    // IPv4-compatible IPv6 (::/96): ipaddr.js calls these `unicast`; all are refused, public or not.
    '::7f00:1', '::127.0.0.1', '::a9fe:a9fe', '::808:808', '::8.8.8.8', '::2',
    // The rest of ::/8, reserved by the IETF, also `unicast` to ipaddr.js.
    '::1:2:3', '1::1', 'ff::1', '0:ff:ffff::1',
    // IPv4-mapped (::ffff:0:0/96) as its IPv4 address; NAT64 (64:ff9b::/96) as the one it embeds.
    '::ffff:192.168.1.1', '::ffff:100.64.0.1', '::ffff:0.0.0.0', '64:ff9b::7f00:1', '64:ff9b::c0a8:101', '64:ff9b::a9fe:a9fe',
    // 6to4 and Teredo whatever they embed; the local-use NAT64 prefix; outside 2000::/3.
    '2002:a00:1::1', '2002:808:808::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '64:ff9b:1::808:808', '4000::1', 'e000::1',
  ]) {
    it(`forbids ${address}`, () => assert.equal(isForbiddenAddress(address), true))
  }
  for (const address of [
    '93.184.215.14', '8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8', '64:ff9b::808:808',
    '2a00:1450:4001:80b::200e', '3ffe:ffff::1',
  ]) {
    it(`allows ${address}`, () => assert.equal(isForbiddenAddress(address), false))
  }

  // Every range ipaddr.js 2.x names (its `range()`), one address of each: only `unicast` may pass.
  const named: [string, string][] = [
    ['0.1.2.3', 'unspecified'], ['255.255.255.255', 'broadcast'], ['224.0.0.1', 'multicast'], ['169.254.1.1', 'linkLocal'],
    ['127.0.0.2', 'loopback'], ['100.64.0.1', 'carrierGradeNat'], ['10.1.1.1', 'private'], ['172.20.0.1', 'private'],
    ['192.168.7.7', 'private'], ['192.0.0.9', 'reserved'], ['192.0.2.1', 'reserved'], ['192.88.99.1', 'reserved'],
    ['198.18.0.1', 'reserved'], ['198.51.100.1', 'reserved'], ['203.0.113.1', 'reserved'], ['240.0.0.1', 'reserved'],
    ['192.175.48.1', 'as112'], ['192.31.196.1', 'as112'], ['192.52.193.1', 'amt'],
    ['::', 'unspecified'], ['fe80::1', 'linkLocal'], ['ff0e::1', 'multicast'], ['::1', 'loopback'], ['fd00::1', 'uniqueLocal'],
    ['fec0::1', 'deprecatedSiteLocal'], ['100::1', 'discard'], ['::ffff:0:a00:1', 'rfc6145'], ['64:ff9b:1::1', 'rfc6052'],
    ['2002::1', '6to4'], ['2001::1', 'teredo'], ['2001:2::1', 'benchmarking'], ['2001:3::1', 'amt'], ['2001:4:112::1', 'as112v6'],
    ['2620:4f:8000::1', 'as112v6'], ['2001:10::1', 'deprecatedOrchid'], ['2001:20::1', 'orchid2'],
    ['2001:30::1', 'droneRemoteIdProtocolEntityTags'], ['5f00::1', 'segmentRouting'], ['2001:db8::1', 'reserved'],
    ['2001:100::1', 'reserved'], ['3fff::1', 'reserved'],
  ]
  it('forbids an address of every range ipaddr.js names', () => {
    for (const [address, range] of named) {
      assert.equal(ipaddr.parse(address).range(), range, `${address} is ${range} to ipaddr.js`)
      assert.equal(isForbiddenAddress(address), true, `${address} (${range})`)
    }
  })

  it('judges ::a.b.c.d, as Node writes an IPv4-compatible address, as ::/96, not as the IPv4 address ipaddr.js reads', () => {
    assert.equal(new SocketAddress({ address: '::808:808', family: 'ipv6' }).address, '::8.8.8.8')
    assert.equal(ipaddr.process('::8.8.8.8').toString(), '8.8.8.8', 'ipaddr.js alone would judge 8.8.8.8')
    for (const address of ['::8.8.8.8', '::93.184.215.14', '::1.1.1.1']) assert.equal(isForbiddenAddress(address), true, address)
  })

  it('forbids ::/96 and ::/8, which ipaddr.js calls unicast', () => {
    for (const address of ['::7f00:1', '::808:808', '::1:2:3', 'ff:ffff::1']) assert.equal(ipaddr.parse(address).range(), 'unicast', address)
    // Both ends of ::/96 and of ::/8, the loopback and unspecified inside them aside.
    for (const address of ['::2', '::ffff:ffff', '::1:0:0', '00ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff']) assert.equal(isForbiddenAddress(address), true, address)
  })
})

describe('checkWebhookUrl', () => {
  const strict = (): { allowPrivateNetworks: boolean; dnsServers: string[] } => ({ allowPrivateNetworks: false, dnsServers: servers() })
  const lenient = (): { allowPrivateNetworks: boolean; dnsServers: string[] } => ({ allowPrivateNetworks: true, dnsServers: servers() })
  const NO_PUBLIC_ADDRESS = 'has a host name that does not resolve to a public address'
  const CHARACTERS = 'must not contain whitespace or control characters'

  it('accepts https to a name with public addresses only', async () => {
    const check = await checkWebhookUrl('https://hooks.example/in?x=1', strict())
    assert.equal(check.ok, true)
    assert.equal(check.ok && check.url.href, 'https://hooks.example/in?x=1')
  })

  it('accepts a public IP literal, v4 and v6', async () => {
    assert.equal((await checkWebhookUrl('https://93.184.215.14:8443/x', strict())).ok, true)
    assert.equal((await checkWebhookUrl('https://[2606:4700:4700::1111]/x', strict())).ok, true)
  })

  // `privateNetworksAllow`: whether WEBHOOK_ALLOW_PRIVATE_NETWORKS=true would accept the URL.
  for (const [url, problem, privateNetworksAllow] of [
    ['not-a-url', 'is not an absolute URL', false],
    ['/relative', 'is not an absolute URL', false],
    ['http://hooks.example/', 'must use https', true],
    ['ftp://hooks.example/', 'must use https', false],
    ['https://user:pw@hooks.example/', 'must not contain a user name or password', false],
    ['https://user@hooks.example/', 'must not contain a user name or password', false],
    ['https://8.8.8.8:0/z', 'must not use port 0', false],
    ['https://127.0.0.1/', 'must not point to a private or reserved address', true],
    // The WHATWG parser turns these spellings into 127.0.0.1 before the host is judged.
    ['https://0x7f.1/', 'must not point to a private or reserved address', true],
    ['https://2130706433/', 'must not point to a private or reserved address', true],
    ['https://[::1]/', 'must not point to a private or reserved address', true],
    ['https://[::ffff:7f00:1]/', 'must not point to a private or reserved address', true],
    ['https://169.254.169.254/latest/meta-data', 'must not point to a private or reserved address', true],
    // The parser writes these as [::7f00:1], [::a9fe:a9fe] and [::808:808]: ::/96, refused.
    ['https://[::127.0.0.1]/', 'must not point to a private or reserved address', true],
    ['https://[::169.254.169.254]/', 'must not point to a private or reserved address', true],
    ['https://[::a9fe:a9fe]/', 'must not point to a private or reserved address', true],
    ['https://[::8.8.8.8]/', 'must not point to a private or reserved address', true],
    ['https://[::1:2:3]/', 'must not point to a private or reserved address', true],
    ['https://[1::1]:8443/', 'must not point to a private or reserved address', true],
    // A name with a private address and a name with none are told the same: nothing says which names exist inside.
    ['https://rebind.example/', NO_PUBLIC_ADDRESS, true],
    ['https://internal.example/', NO_PUBLIC_ADDRESS, true],
    ['https://mapped.example/', NO_PUBLIC_ADDRESS, true],
    ['https://compatible.example/', NO_PUBLIC_ADDRESS, true],
    ['https://reserved6.example/', NO_PUBLIC_ADDRESS, true],
    ['https://localhost/', NO_PUBLIC_ADDRESS, true],
    ['https://nowhere.example/', NO_PUBLIC_ADDRESS, true],
    ['https://noaddress.example/', NO_PUBLIC_ADDRESS, true],
    // The URL parser would drop the tab and newlines and trim the rest: what is stored is not what is called.
    ['https://hooks.exa\nmple/', CHARACTERS, false],
    ['https://hooks.example/\tin', CHARACTERS, false],
    ['https://hooks.example/in\r\n', CHARACTERS, false],
    ['https://hooks.example/\u001b[31min', CHARACTERS, false],
    ['https://hooks.example/in\u0000', CHARACTERS, false],
    ['https://hooks.example/in\u007f', CHARACTERS, false],
    ['https://hooks.example/in\u0085', CHARACTERS, false],
    [' https://hooks.example/', CHARACTERS, false],
    ['https://hooks.example/in ', CHARACTERS, false],
    ['https://hooks.example/a b', CHARACTERS, false],
    ['https://hooks.example/\u00a0', CHARACTERS, false],
    ['https://hooks.example/\u2028', CHARACTERS, false],
    ['https://hooks.example/\u3000', CHARACTERS, false],
    ['https://hooks.exam\u200bple/', CHARACTERS, false],
    ['https://hooks.example/\u202egnp.exe', CHARACTERS, false],
    ['https://hooks.example/\ufeff', CHARACTERS, false],
  ] as const) {
    it(`refuses ${JSON.stringify(url)}: ${problem}`, async () => {
      assert.deepEqual(await checkWebhookUrl(url, strict()), { ok: false, problem, privateNetworksAllow })
    })
  }

  it('refuses whitespace and control characters with private networks allowed too', async () => {
    for (const url of ['http://127.0.0.1:9/\n', 'http://127.0.0.1:9/\u001b', 'http://127.0.0.1:9/a b', '\thttp://127.0.0.1:9/']) {
      assert.deepEqual(await checkWebhookUrl(url, lenient()), { ok: false, problem: CHARACTERS, privateNetworksAllow: false }, JSON.stringify(url))
    }
  })

  it('allows http and private addresses when private networks are allowed, never credentials', async () => {
    assert.equal((await checkWebhookUrl('http://127.0.0.1:9999/hook', lenient())).ok, true)
    assert.equal((await checkWebhookUrl('https://internal.example/', lenient())).ok, true)
    assert.equal((await checkWebhookUrl('https://[::127.0.0.1]/', lenient())).ok, true)
    assert.deepEqual(await checkWebhookUrl('ftp://127.0.0.1/', lenient()), { ok: false, problem: 'must use https or http', privateNetworksAllow: false })
    assert.deepEqual(await checkWebhookUrl('http://a:b@127.0.0.1/', lenient()), {
      ok: false,
      problem: 'must not contain a user name or password',
      privateNetworksAllow: false,
    })
  })

  it('answers a lookup that does not come within the timeout as a refusal naming it', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const asked = dns.asked.length
    let settled = false
    const check = checkWebhookUrl('https://slow.example/', strict()).finally(() => (settled = true))
    await until(() => dns.asked.length >= asked + 2)
    t.mock.timers.tick(LOOKUP_TIMEOUT_MS - 1)
    await until(() => true)
    assert.equal(settled, false, 'not before the timeout')
    t.mock.timers.tick(1)
    assert.deepEqual(await check, { ok: false, problem: 'has a host name that did not resolve within 5 s', privateNetworksAllow: false })
  })

  it('makes a creation or PATCH whose lookup times out 400 invalid_webhook_url, naming the timeout', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const config = { timeoutMs: 10_000, retryScheduleMs: [], allowPrivateNetworks: false, maxEndpoints: 100, concurrency: 100, dnsServers: servers() }
    const asked = dns.asked.length
    const refusal = assert.rejects(allowedWebhookUrl('https://slow.example/hooks', config), (error: unknown) => {
      assert.ok(error instanceof ApiError)
      assert.equal(error.code, 'invalid_webhook_url')
      assert.equal(error.statusCode, 400)
      assert.equal(error.message, 'The webhook URL has a host name that did not resolve within 5 s.')
      return true
    })
    await until(() => dns.asked.length >= asked + 2)
    t.mock.timers.tick(LOOKUP_TIMEOUT_MS)
    await refusal
  })
})

describe('guardedLookup', () => {
  function resolve(lookup: LookupFunction, host: string, all: boolean): Promise<{ error: NodeJS.ErrnoException | null; result: unknown }> {
    return new Promise((done) => lookup(host, { all }, (error, result) => done({ error, result })))
  }

  it('refuses at connect time a name that resolves to a forbidden address', async () => {
    const lookup = guardedLookup({ allowPrivateNetworks: false, dnsServers: servers() })
    for (const all of [true, false]) {
      const { error } = await resolve(lookup, 'rebind.example', all)
      assert.equal(error?.code, ADDRESS_NOT_ALLOWED)
      assert.equal(error?.message, 'address not allowed')
    }
  })

  it('passes public addresses on in the form asked for', async () => {
    const lookup = guardedLookup({ allowPrivateNetworks: false, dnsServers: servers() })
    assert.deepEqual((await resolve(lookup, 'hooks.example', true)).result, [
      { address: '93.184.215.14', family: 4 },
      { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
    ] satisfies LookupAddress[])
    assert.equal((await resolve(lookup, 'hooks.example', false)).result, '93.184.215.14')
  })

  it('passes private addresses when allowed, and DNS errors as they are', async () => {
    const lookup = guardedLookup({ allowPrivateNetworks: true, dnsServers: servers() })
    assert.equal((await resolve(lookup, 'rebind.example', false)).error, null)
    assert.equal((await resolve(lookup, 'localhost', false)).result, '127.0.0.1')
    assert.equal((await resolve(lookup, 'nowhere.example', false)).error?.code, 'ENOTFOUND')
  })

  it('refuses a name that resolves into ::/96 or ::/8', async () => {
    const lookup = guardedLookup({ allowPrivateNetworks: false, dnsServers: servers() })
    for (const host of ['compatible.example', 'reserved6.example']) assert.equal((await resolve(lookup, host, false)).error?.code, ADDRESS_NOT_ALLOWED, host)
  })

  it('fails a lookup that does not answer within the timeout with LOOKUP_TIMED_OUT, private networks allowed or not', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    for (const allowPrivateNetworks of [false, true]) {
      const asked = dns.asked.length
      const pending = resolve(guardedLookup({ allowPrivateNetworks, dnsServers: servers() }), 'slow.example', false)
      await until(() => dns.asked.length >= asked + 2)
      t.mock.timers.tick(LOOKUP_TIMEOUT_MS)
      assert.equal((await pending).error?.code, LOOKUP_TIMED_OUT)
    }
  })
})

describe('lookups of names that never answer', () => {
  it('delay no other: a creation and a connection naming a good name are answered while 100 lookups of a dropped name wait', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const before = dns.asked.filter((question) => question.startsWith('slow.example ')).length
    const hanging = [
      ...Array.from({ length: 50 }, () => checkWebhookUrl('https://slow.example/', strict())),
      ...Array.from({ length: 50 }, () => resolveGuarded('slow.example')),
    ]
    let settled = 0
    for (const lookup of hanging) void lookup.finally(() => settled++)
    const good: unknown[] = []
    void checkWebhookUrl('https://hooks.example/', strict()).then((check) => good.push(check.ok))
    void resolveGuarded('hooks.example').then((lookup) => good.push(lookup.result))
    await until(() => good.length === 2, 'the good name answered while the lookups of the dropped name wait')
    assert.deepEqual(good.sort(), ['93.184.215.14', true])
    assert.equal(settled, 0, 'every lookup of the dropped name still waits')
    await until(slowAsked(before + 200), 'every lookup of the dropped name asked of DNS') // A and AAAA of each, all in flight
    t.mock.timers.tick(LOOKUP_TIMEOUT_MS)
    await Promise.all(hanging)
    assert.equal(settled, 100)
  })

  function strict(): { allowPrivateNetworks: boolean; dnsServers: string[] } {
    return { allowPrivateNetworks: false, dnsServers: servers() }
  }

  function resolveGuarded(host: string): Promise<{ error: NodeJS.ErrnoException | null; result: unknown }> {
    return new Promise((done) => guardedLookup(strict())(host, { all: false }, (error, result) => done({ error, result })))
  }
})
