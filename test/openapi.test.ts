import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { readFileSync } from 'node:fs'
import { V1_ERROR_CODES } from '../src/errors.js'
import { startTestServer, type TestServer } from './support/harness.js'

interface Operation {
  operationId: string
  tags: string[]
  deprecated?: boolean
  'x-stability'?: string
  security?: unknown
  parameters?: { name: string; in: string; required: boolean; schema: { type: string; format: string } }[]
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>
}

// The document does not depend on the store, so one store is enough.
describe('OpenAPI document', () => {
  let server: TestServer
  let doc: {
    openapi: string
    info: { version: string }
    servers: { url: string }[]
    paths: Record<string, Record<string, Operation>>
    components: { securitySchemes: Record<string, unknown>; schemas: Record<string, { required?: string[]; properties: Record<string, unknown> }> }
  }

  before(async () => {
    server = await startTestServer('sqlite', {
      env: { PUBLIC_BASE_URL: 'https://api.example.test/v1', STAGING_BASE_URL: 'https://staging.example.test/v1' },
    })
    const response = await fetch(`${server.origin}/v1/openapi.json`) // no key needed
    assert.equal(response.status, 200)
    doc = (await response.json()) as typeof doc
  })

  it('describes exactly the three operations, relative to servers ending in /v1', () => {
    assert.match(doc.openapi, /^3\./)
    assert.equal(doc.info.version, '1.0.0')
    assert.deepEqual(doc.servers.map((s) => s.url), ['https://api.example.test/v1', 'https://staging.example.test/v1'])
    assert.deepEqual(Object.keys(doc.paths).sort(), ['/pets/{petId}', '/store/orders', '/store/orders/{orderId}'])
    assert.deepEqual(Object.keys(doc.paths['/store/orders']!), ['get'])
    assert.deepEqual(Object.keys(doc.paths['/store/orders/{orderId}']!), ['delete'])
    assert.deepEqual(Object.keys(doc.paths['/pets/{petId}']!), ['get'])
  })

  it('tags both order operations orders, marks showPetById deprecated, and gives every operation x-stability', () => {
    const list = doc.paths['/store/orders']!.get!
    const cancel = doc.paths['/store/orders/{orderId}']!.delete!
    const pet = doc.paths['/pets/{petId}']!.get!
    assert.equal(list.operationId, 'listOrders')
    assert.equal(cancel.operationId, 'cancelOrder')
    assert.equal(pet.operationId, 'showPetById')
    assert.deepEqual(list.tags, ['orders'])
    assert.deepEqual(cancel.tags, ['orders'])
    assert.equal(pet.deprecated, true)
    for (const op of [list, cancel, pet]) {
      assert.ok(['stable', 'beta', 'experimental'].includes(op['x-stability']!))
      assert.deepEqual(op.security, [{ bearerAuth: [] }])
    }
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      type: 'http',
      scheme: 'bearer',
      description: 'An API key: `pso_` followed by 40 base62 characters',
    })
  })

  it('documents every status each operation answers, errors as the Error schema', () => {
    const cancel = doc.paths['/store/orders/{orderId}']!.delete!
    assert.deepEqual(Object.keys(cancel.responses).sort(), ['204', '400', '401', '403', '404', '409'])
    assert.equal(cancel.responses['204']!.content, undefined)
    for (const status of ['400', '401', '403', '404', '409']) {
      assert.deepEqual(cancel.responses[status]!.content!['application/json']!.schema, { $ref: '#/components/schemas/Error' })
    }
    assert.deepEqual(Object.keys(doc.paths['/store/orders']!.get!.responses).sort(), ['200', '401', '403'])
    assert.deepEqual(Object.keys(doc.paths['/pets/{petId}']!.get!.responses).sort(), ['200', '400', '401', '403', '404', '410'])
    const param = cancel.parameters![0]!
    assert.deepEqual([param.name, param.in, param.required, param.schema.type, param.schema.format], ['orderId', 'path', true, 'integer', 'int64'])
  })

  it('has the Order, Pet and Error schemas of the contract', () => {
    const { Order, Error: ErrorSchema, Pet } = doc.components.schemas
    assert.deepEqual(Object.keys(Order!.properties), ['id', 'petId', 'quantity', 'shipDate', 'complete'])
    assert.equal(Order!.required, undefined, 'no Order field is required in the contract')
    assert.deepEqual(ErrorSchema!.required, ['code', 'message', 'status'])
    assert.deepEqual((ErrorSchema!.properties.code as { enum: string[] }).enum, V1_ERROR_CODES)
    assert.deepEqual(Pet!.required, ['id', 'name'])
    assert.deepEqual(Order!.properties.id, { type: 'integer', format: 'int64', description: 'Unique order identifier' })
  })

  it('is byte for byte the document v1 has always served (v2 adds nothing to it)', async () => {
    const plain = await startTestServer('sqlite') // default configuration, as when the fixture was written
    const text = await (await fetch(`${plain.origin}/v1/openapi.json`)).text()
    assert.equal(text, readFileSync(new URL('./fixtures/v1-openapi.json', import.meta.url), 'utf8').trimEnd())
  })
})
