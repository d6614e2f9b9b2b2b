import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { generateApiKey, type ApiKey, type Scope } from '../src/domain/api-keys.js'
import { ApiError } from '../src/errors.js'
import { Authenticator } from '../src/http/authenticator.js'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'

forEachStore('API keys', (kind) => {
  let server: TestServer
  let key: string
  const KEY_CACHE_TTL_MS = 300
  const list = (headers: Record<string, string>) => fetch(`${server.origin}/v1/store/orders`, { headers })

  before(async () => {
    server = await startTestServer(kind, { env: { KEY_CACHE_TTL_MS: String(KEY_CACHE_TTL_MS) } })
    key = await server.createKey()
  })

  it('accepts a valid key with the scheme in any case', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      assert.equal((await list({ authorization: `${scheme} ${key}` })).status, 200, scheme)
    }
  })

  it('answers a missing key with 401 and a bare Bearer challenge (RFC 6750 §3)', async () => {
    const response = await list({})
    assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="petstore"')
    await expectError(response, 401, 'unauthorized')
  })

  it('answers a non-bearer scheme with 401 and a bare challenge', async () => {
    const response = await list({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` })
    assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="petstore"')
    await expectError(response, 401, 'unauthorized')
  })

  it('answers malformed and unknown keys with 401 and error="invalid_token"', async () => {
    const unknown = generateApiKey().secret
    for (const header of ['Bearer', 'Bearer ', `Bearer ${key} extra`, 'Bearer pso_short', `Bearer ${key.slice(0, -1)}!`, `Bearer ${unknown}`]) {
      const response = await list({ authorization: header })
      const challenge = response.headers.get('www-authenticate') ?? ''
      assert.match(challenge, /^Bearer realm="petstore", error="invalid_token"/, header)
      // RFC 6750 §3: error_description holds no `"` or `\`, or its quoted string ends early.
      assert.match(challenge, /^Bearer realm="petstore", error="invalid_token", error_description="[\x20\x21\x23-\x5B\x5D-\x7E]*"$/, header)
      const body = await expectError(response, 401, 'unauthorized')
      assert.ok(challenge.includes(`error_description="${(body.message as string).replaceAll('"', "'")}"`), 'the message, its quotes as apostrophes')
    }
  })

  it('tells a key cut short, or otherwise not of a key\'s shape, what a key looks like, never repeating it', async () => {
    const cases: [string, string][] = [
      [key.slice(0, 20), 'The API key is malformed: a key is pso_ followed by 40 letters and digits, 44 characters in all; this one has 20.'],
      [key.slice(0, 40), 'The API key is not known: a key is pso_ followed by 40 letters and digits, 44 characters in all; this one has 40.'],
      [`${key}XY`, 'The API key is not known: a key is pso_ followed by 40 letters and digits, 44 characters in all; this one has 46.'],
      [`sk_${key.slice(4)}`, 'The API key is malformed: a key is pso_ followed by 40 letters and digits, 44 characters in all; this one does not start with pso_.'],
      [`${key.slice(0, 43)}-`, 'The API key is malformed: a key is pso_ followed by 40 letters and digits, 44 characters in all; this one has other characters.'],
      [generateApiKey().secret, 'The API key is not known.'],
    ]
    for (const [token, message] of cases) {
      const response = await list(bearer(token))
      const challenge = response.headers.get('www-authenticate') ?? ''
      const body = await expectError(response, 401, 'unauthorized')
      assert.equal(body.message, message, token)
      assert.equal(challenge, `Bearer realm="petstore", error="invalid_token", error_description="${message}"`)
      assert.ok(!JSON.stringify(body).includes(token.slice(4, 20)), 'the key is not repeated')
    }
  })

  it('refuses an expired key', async () => {
    const expired = await server.createKey({ expiresAt: new Date(Date.now() - 1000) })
    const response = await list(bearer(expired))
    assert.match(response.headers.get('www-authenticate') ?? '', /error="invalid_token"/)
    const body = await expectError(response, 401, 'unauthorized')
    assert.match(body.message as string, /expired/)
  })

  it('refuses a revoked key on a running server within the cache bound (KEY_CACHE_TTL_MS)', async () => {
    const revocable = await server.createKey()
    assert.equal((await list(bearer(revocable))).status, 200)
    const [stored] = (await server.store.apiKeys.list()).slice(-1)
    await server.store.apiKeys.revoke(String(stored!.id))
    const revokedAt = performance.now()
    // The bound itself, to the millisecond, is held on injected clocks below; here, that it holds end
    // to end: the key was read before the revocation, so a request sent once KEY_CACHE_TTL_MS has
    // passed since is refused (a lower bound of waiting: no speed is asked of the machine).
    while (performance.now() - revokedAt <= KEY_CACHE_TTL_MS) await new Promise((resolve) => setTimeout(resolve, 20))
    const response = await list(bearer(revocable))
    const body = await expectError(response, 401, 'unauthorized')
    assert.match(body.message as string, /revoked/)
  })

  it('answers a key without the scope with 403 insufficient_scope and names the scope', async () => {
    const petsOnly = await server.createKey({ scopes: ['pets:read'] })
    const response = await list(bearer(petsOnly))
    assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="petstore", error="insufficient_scope", scope="orders:read"')
    await expectError(response, 403, 'insufficient_scope')
  })

  it('never echoes the key in an error body', async () => {
    const unknown = generateApiKey().secret
    const response = await list(bearer(unknown))
    assert.ok(!(await response.text()).includes(unknown))
  })
})

describe('Authenticator, on injected clocks', () => {
  const secret = generateApiKey().secret
  const start = Date.parse('2026-11-26T12:00:00Z')
  const setup = (key: Partial<ApiKey> = {}) => {
    const clocks = { monotonic: 1000, wall: start }
    const stored: ApiKey = { id: 7n, name: 'k', displayPrefix: secret.slice(0, 12), scopes: ['orders:read'], createdAt: new Date(start), expiresAt: null, revokedAt: null, ...key }
    const lookups = { count: 0 }
    const authenticator = new Authenticator(
      async () => (lookups.count++, { ...stored }),
      2000,
      () => clocks.monotonic,
      () => clocks.wall,
    )
    // What admission does with a token, less the rate limits; what a held long poll does as it wakes.
    const authenticate = (header: string, scope: Scope = 'orders:read'): Promise<ApiKey> => authenticator.recheck(header, scope)
    return { clocks, stored, lookups, authenticate }
  }
  const refusal = (message: RegExp) => (error: unknown) => error instanceof ApiError && error.code === 'unauthorized' && message.test(error.message)

  it('keys its cache by the token: padded spellings of one key are one entry and one lookup', async () => {
    const { lookups, authenticate } = setup()
    for (let spaces = 1; spaces <= 3000; spaces++) await authenticate(`Bearer${' '.repeat(spaces)}${secret}`)
    assert.equal(lookups.count, 1)
  })

  it('reads a key again once its entry is KEY_CACHE_TTL_MS old on the monotonic clock, whatever the wall clock does', async () => {
    const { clocks, stored, lookups, authenticate } = setup()
    await authenticate(`Bearer ${secret}`)
    stored.revokedAt = new Date(clocks.wall)
    clocks.monotonic += 1999
    await authenticate(`Bearer ${secret}`) // still within the bound: the cached key
    clocks.wall -= 3600_000 // the wall clock is stepped back an hour
    clocks.monotonic += 1
    await assert.rejects(authenticate(`Bearer ${secret}`), refusal(/revoked/))
    assert.equal(lookups.count, 2)
  })

  it('honours an expiry that passes while the key is cached, without a lookup', async () => {
    const { clocks, lookups, authenticate } = setup({ expiresAt: new Date(start + 400) })
    await authenticate(`Bearer ${secret}`)
    clocks.wall += 400
    await assert.rejects(authenticate(`Bearer ${secret}`), refusal(/expired/))
    assert.equal(lookups.count, 1)
  })
})
