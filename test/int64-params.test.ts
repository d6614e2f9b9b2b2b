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

// The app's validator parses int64 path parameters itself and hands every other part of a request
// (query string, body) to Fastify's default validator: v2's query strings and bodies are TypeBox
// schemas. Unit tests: routes added to the app for the test, answered through inject.
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
            { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })), status: Type.Optional(Type.Union([Type.Literal('pending'), Type.Literal('shipped')])) },
            { additionalProperties: false },
          ),
        },
      },
      async (request) => ({ query: request.query }),
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

  it('validates and coerces a query string with its schema (Fastify\'s default validator)', async () => {
    const ok = await app.inject({ url: '/test/pages?limit=25&status=shipped' })
    assert.equal(ok.statusCode, 200, ok.body)
    assert.deepEqual(ok.json(), { query: { limit: 25, status: 'shipped' } }) // "25" coerced to a number
    for (const query of ['limit=0', 'limit=abc', 'limit=1001', 'status=cancelled']) {
      const refused = await app.inject({ url: `/test/pages?${query}` })
      assert.equal(refused.statusCode, 400, query)
      assert.deepEqual(Object.keys(refused.json()).sort(), ['code', 'message', 'status'], query)
    }
  })

  it('validates a JSON body with its schema, and a path id exactly as an int64', async () => {
    const ok = await app.inject({ method: 'POST', url: '/test/cancel/9223372036854775807', payload: { reason: 'duplicate' } })
    assert.equal(ok.statusCode, 200, ok.body)
    assert.deepEqual(ok.json(), { orderId: '9223372036854775807', body: { reason: 'duplicate' } })
    const badBody = await app.inject({ method: 'POST', url: '/test/cancel/1', payload: { reason: 'whim' } })
    assert.equal(badBody.statusCode, 400)
    const badId = await app.inject({ method: 'POST', url: '/test/cancel/9223372036854775808', payload: { reason: 'other' } })
    assert.equal(badId.statusCode, 400)
    assert.equal(badId.json().code, 'invalid_order_id')
  })
})
