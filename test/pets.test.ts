import assert from 'node:assert/strict'
import { before, it } from 'node:test'
import { bearer, expectError, forEachStore, records, startTestServer, type TestServer } from './support/harness.js'

const DEPRECATED_AT = '2026-01-01T00:00:00Z'
const SUNSET_AT = '2099-07-01T00:00:00Z'
const LINK = 'https://docs.example.test/deprecations#pets'

function expectDeprecationHeaders(response: Response): void {
  assert.equal(response.headers.get('deprecation'), `@${Date.parse(DEPRECATED_AT) / 1000}`)
  assert.equal(response.headers.get('sunset'), 'Wed, 01 Jul 2099 00:00:00 GMT')
  assert.equal(response.headers.get('link'), `<${LINK}>; rel="deprecation"; type="text/html"`)
}

forEachStore('showPetById (deprecated)', (kind) => {
  let server: TestServer
  let key: string
  const env = { PETS_DEPRECATED_AT: DEPRECATED_AT, PETS_SUNSET_AT: SUNSET_AT, PETS_DEPRECATION_LINK: LINK }

  before(async () => {
    server = await startTestServer(kind, { env })
    key = await server.createKey()
    await server.store.pets.import(
      records([
        { id: 9223372036854775807n, name: 'Rex', tag: 'dog' },
        { id: 1n, name: 'Tom' },
      ]),
    )
  })

  it('returns the pet, int64 id exact, with Deprecation, Sunset and Link headers', async () => {
    const response = await fetch(`${server.origin}/v1/pets/9223372036854775807`, { headers: bearer(key) })
    assert.equal(response.status, 200)
    expectDeprecationHeaders(response)
    assert.equal(await response.text(), '{"id":9223372036854775807,"name":"Rex","tag":"dog"}')
    const tom = await fetch(`${server.origin}/v1/pets/1`, { headers: bearer(key) })
    assert.deepEqual(await tom.json(), { id: 1, name: 'Tom' })
  })

  it('carries the deprecation headers on errors too', async () => {
    const missing = await fetch(`${server.origin}/v1/pets/2`, { headers: bearer(key) })
    expectDeprecationHeaders(missing)
    await expectError(missing, 404, 'pet_not_found')
    const unauthorized = await fetch(`${server.origin}/v1/pets/1`)
    expectDeprecationHeaders(unauthorized)
    await expectError(unauthorized, 401, 'unauthorized')
  })

  it('rejects a pet id that is not int64 with 400 invalid_pet_id', async () => {
    for (const id of ['9223372036854775808', 'rex', '1.0']) {
      await expectError(await fetch(`${server.origin}/v1/pets/${id}`, { headers: bearer(key) }), 400, 'invalid_pet_id')
    }
  })

  it('needs the pets:read scope', async () => {
    const ordersOnly = await server.createKey({ scopes: ['orders:read', 'orders:cancel'] })
    await expectError(await fetch(`${server.origin}/v1/pets/1`, { headers: bearer(ordersOnly) }), 403, 'insufficient_scope')
  })

  it('answers 410 gone after the sunset date, with the headers', async () => {
    const past = await startTestServer(kind, {
      env: { PETS_DEPRECATED_AT: '2020-01-01T00:00:00Z', PETS_SUNSET_AT: '2021-01-01T00:00:00Z' },
    })
    const response = await fetch(`${past.origin}/v1/pets/1`, { headers: bearer(await past.createKey()) })
    assert.equal(response.headers.get('sunset'), 'Fri, 01 Jan 2021 00:00:00 GMT')
    assert.equal(response.headers.get('deprecation'), '@1577836800')
    await expectError(response, 410, 'gone')
  })
})
