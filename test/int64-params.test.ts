import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import Type from 'typebox'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import type { ApiApp } from '../src/http/api-app.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { createDatabase, type TestDatabaseHandle } from './support/harness.js'

// The app's validator parses int64 path parameters itself, query strings strictly from their schema
// (src/http/strict-query.ts), bodies strictly too (src/http/strict-body.ts: a field is refused, never
// dropped), and hands every other part of a request (headers) to Fastify's default validator: v2's
// query strings and bodies are TypeBox schemas. Unit tests: routes added to the app for the test,
// answered through inject.
describe('the validator of path parameters and of everything else', () => {
  let database: TestDatabaseHandle
  let store: Store
  let app: ApiApp

  before(async () => {
    database = await createDatabase('sqlite')
    store = await openStore(database.config)
    await store.migrate()
    app = await buildApp({ config: { ...loadConfig({}), database: database.config }, store })
    const test = app as unknown as FastifyInstance
    test.get(
      '/test/pages',
      {
        schema: {
          querystring: Type.Object(
            {
              limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
              status: Type.Optional(Type.String({ pattern: '^(pending|shipped)$' })),
              petId: Type.Optional(Type.Unsafe<bigint>({ type: 'integer', format: 'int64' })),
            },
            { additionalProperties: false },
          ),
        },
      },
      async (request) => {
        const { petId, ...rest } = request.query as { petId?: bigint }
        return { query: petId === undefined ? rest : { ...rest, petId: String(petId) } }
      },
    )
    test.post(
      '/test/cancel/:orderId',
      {
        schema: {
          params: Type.Object({ orderId: Type.Unsafe<bigint>({ type: 'integer', format: 'int64' }) }),
          body: Type.Object({ reason: Type.Union([Type.Literal('duplicate'), Type.Literal('other')]) }, { additionalProperties: false }),
        },
      },
      async (request) => ({ orderId: String((request.params as { orderId: bigint }).orderId), body: request.body }),
    )
    await app.ready()
  })

  after(async () => {
    await app.close()
    await store.close()
    await database.dispose()
  })

  it('validates and converts a query string strictly with its schema', async () => {
    const ok = await app.inject({ url: '/test/pages?limit=25&status=shipped&petId=9223372036854775807' })
    assert.equal(ok.statusCode, 200, ok.body)
    // "25" converted to a number; the int64 exactly, as a bigint (sent back as its digits)
    assert.deepEqual(ok.json(), { query: { limit: 25, status: 'shipped', petId: '9223372036854775807' } })
    for (const [query, named] of <Array<[string, string]>>[
      ['limit=0', 'limit'],
      ['limit=abc', 'limit'],
      ['limit=1001', 'limit'],
      ['status=cancelled', 'status'],
      ['petId=9223372036854775808', 'petId'],
      ['petid=1', 'petid'], // unknown: a typo must not be ignored
      ['limit=1&limit=2', 'limit'], // repeated
    ]) {
      const refused = await app.inject({ url: `/test/pages?${query}` })
      assert.equal(refused.statusCode, 400, query)
      assert.equal(refused.json().code, 'invalid_parameter', query)
      assert.match(refused.json().message, new RegExp(named), query)
    }
  })

  it('validates a JSON body with its schema, and a path id exactly as an int64', async () => {
    const ok = await app.inject({ method: 'POST', url: '/test/cancel/9223372036854775807', payload: { reason: 'duplicate' } })
    assert.equal(ok.statusCode, 200, ok.body)
    assert.deepEqual(ok.json(), { orderId: '9223372036854775807', body: { reason: 'duplicate' } })
    for (const [payload, named] of <Array<[unknown, RegExp]>>[
      [{ reason: 'whim' }, /"reason" must be one of duplicate, other; got "whim"/],
      [{ reason: 'other', extra: 1 }, /Unknown field "extra"/], // refused, not silently removed
      [{}, /"reason" is required/],
      [[], /JSON object/],
    ]) {
      const badBody = await app.inject({ method: 'POST', url: '/test/cancel/1', payload: payload as object })
      assert.equal(badBody.statusCode, 400, JSON.stringify(payload))
      assert.equal(badBody.json().code, 'invalid_body')
      assert.match(badBody.json().message, named)
    }
    const noBody = await app.inject({ method: 'POST', url: '/test/cancel/1' })
    assert.equal(noBody.json().code, 'invalid_body', 'a required body')
    const badId = await app.inject({ method: 'POST', url: '/test/cancel/9223372036854775808', payload: { reason: 'other' } })
    assert.equal(badId.statusCode, 400)
    assert.equal(badId.json().code, 'invalid_order_id')
  })
})
