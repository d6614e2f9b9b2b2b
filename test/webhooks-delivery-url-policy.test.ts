import assert from 'node:assert/strict'
import type { LookupAddress } from 'node:dns'
import type { LookupFunction } from 'node:net'
import { describe, it } from 'node:test'
import { ADDRESS_NOT_ALLOWED, checkWebhookUrl, guardedLookup, isForbiddenAddress } from '../src/webhooks/url-policy.js'

// A stand-in for DNS: these tests judge what a name resolves to, without a resolver we control.
function fakeDns(records: Record<string, string[]>): LookupFunction {
  return (hostname, _options, callback) => {
    const addresses = records[hostname]
    if (addresses === undefined) {
      const error: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`)
      error.code = 'ENOTFOUND'
      return callback(error, '')
    }
    callback(null, addresses.map((address): LookupAddress => ({ address, family: address.includes(':') ? 6 : 4 })))
  }
}

const dns = fakeDns({
  'hooks.example': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
  'rebind.example': ['93.184.215.14', '127.0.0.1'],
  'internal.example': ['10.1.2.3'],
  'mapped.example': ['::ffff:192.168.1.1'],
})

describe('isForbiddenAddress', () => {
  for (const address of [
    '127.0.0.1', '127.255.0.9', '10.0.0.1', '172.16.5.4', '172.31.255.255', '192.168.0.1', '169.254.169.254',
    '100.64.0.1', '100.127.255.254', '0.0.0.0', '255.255.255.255', '224.0.0.1', '239.1.2.3', '192.0.2.10', '240.0.0.1',
    '::1', '::', 'fe80::1', 'fe80::1%eth0', 'fc00::1', 'fd12:3456::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1',
    '::ffff:169.254.169.254', '64:ff9b::a00:1', '2002:7f00:1::1', 'not an address',
  ]) {
    it(`forbids ${address}`, () => assert.equal(isForbiddenAddress(address), true))
  }
  for (const address of ['93.184.215.14', '8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8', '64:ff9b::808:808']) {
    it(`allows ${address}`, () => assert.equal(isForbiddenAddress(address), false))
  }
})

describe('checkWebhookUrl', () => {
  const strict = { allowPrivateNetworks: false, lookup: dns }
  const lenient = { allowPrivateNetworks: true, lookup: dns }

  it('accepts https to a name with public addresses only', async () => {
    const check = await checkWebhookUrl('https://hooks.example/in?x=1', strict)
    assert.equal(check.ok, true)
    assert.equal(check.ok && check.url.href, 'https://hooks.example/in?x=1')
  })

  it('accepts a public IP literal, v4 and v6', async () => {
    assert.equal((await checkWebhookUrl('https://93.184.215.14:8443/x', strict)).ok, true)
    assert.equal((await checkWebhookUrl('https://[2606:4700:4700::1111]/x', strict)).ok, true)
  })

  for (const [url, problem] of [
    ['not a url', 'is not an absolute URL'],
    ['/relative', 'is not an absolute URL'],
    ['http://hooks.example/', 'must use https'],
    ['ftp://hooks.example/', 'must use https'],
    ['https://user:pw@hooks.example/', 'must not contain a user name or password'],
    ['https://user@hooks.example/', 'must not contain a user name or password'],
    ['https://127.0.0.1/', 'must not point to a private or reserved address'],
    // The WHATWG parser turns these spellings into 127.0.0.1 before the host is judged.
    ['https://0x7f.1/', 'must not point to a private or reserved address'],
    ['https://2130706433/', 'must not point to a private or reserved address'],
    ['https://[::1]/', 'must not point to a private or reserved address'],
    ['https://[::ffff:7f00:1]/', 'must not point to a private or reserved address'],
    ['https://169.254.169.254/latest/meta-data', 'must not point to a private or reserved address'],
    ['https://rebind.example/', 'has a host name that resolves to a private or reserved address'],
    ['https://internal.example/', 'has a host name that resolves to a private or reserved address'],
    ['https://mapped.example/', 'has a host name that resolves to a private or reserved address'],
    ['https://nowhere.example/', 'has a host name that does not resolve'],
  ] as const) {
    it(`refuses ${url}: ${problem}`, async () => {
      assert.deepEqual(await checkWebhookUrl(url, strict), { ok: false, problem })
    })
  }

  it('allows http and private addresses when private networks are allowed, never credentials', async () => {
    assert.equal((await checkWebhookUrl('http://127.0.0.1:9999/hook', lenient)).ok, true)
    assert.equal((await checkWebhookUrl('https://internal.example/', lenient)).ok, true)
    assert.deepEqual(await checkWebhookUrl('ftp://127.0.0.1/', lenient), { ok: false, problem: 'must use https or http' })
    assert.deepEqual(await checkWebhookUrl('http://a:b@127.0.0.1/', lenient), { ok: false, problem: 'must not contain a user name or password' })
  })
})

describe('guardedLookup', () => {
  function resolve(lookup: LookupFunction, host: string, all: boolean): Promise<{ error: NodeJS.ErrnoException | null; result: unknown }> {
    return new Promise((done) => lookup(host, { all }, (error, result) => done({ error, result })))
  }

  it('refuses at connect time a name that resolves to a forbidden address', async () => {
    const lookup = guardedLookup({ allowPrivateNetworks: false, lookup: dns })
    for (const all of [true, false]) {
      const { error } = await resolve(lookup, 'rebind.example', all)
      assert.equal(error?.code, ADDRESS_NOT_ALLOWED)
      assert.equal(error?.message, 'address not allowed')
    }
  })

  it('passes public addresses on in the form asked for', async () => {
    const lookup = guardedLookup({ allowPrivateNetworks: false, lookup: dns })
    assert.deepEqual((await resolve(lookup, 'hooks.example', true)).result, [
      { address: '93.184.215.14', family: 4 },
      { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
    ])
    assert.equal((await resolve(lookup, 'hooks.example', false)).result, '93.184.215.14')
  })

  it('passes private addresses when allowed, and DNS errors as they are', async () => {
    const lookup = guardedLookup({ allowPrivateNetworks: true, lookup: dns })
    assert.equal((await resolve(lookup, 'rebind.example', false)).error, null)
    assert.equal((await resolve(lookup, 'nowhere.example', false)).error?.code, 'ENOTFOUND')
  })
})
