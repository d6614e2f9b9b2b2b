import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { after, before, describe, it } from 'node:test'
import { ERROR_CODES, ERRORS } from '../src/errors.js'
import { CANCELLATION_REASONS } from '../src/domain/order-pages.js'
import { ListOrderEventsQuery } from '../src/schemas/order-event.js'
import { ListOrdersQuery } from '../src/schemas/order-v2.js'
import { startTestServer } from './support/harness.js'

const REDOCLY_CLI = join(dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')), 'bin', 'cli.js')
const REDOCLY_CONFIG = fileURLToPath(new URL('../redocly.yaml', import.meta.url))

interface Operation {
  operationId: string
  summary?: string
  description?: string
  tags: string[]
  'x-stability'?: string
  security?: unknown
  parameters?: { name: string; in: string; required: boolean; description?: string; schema: Record<string, unknown> }[]
  requestBody?: { required: boolean; content: Record<string, { schema: Record<string, unknown>; example?: unknown }> }
  responses: Record<string, { description: string; content?: Record<string, { schema?: Record<string, unknown>; examples?: Record<string, { value: { code: string; message: string; status: number } }> }> }>
}
interface Document {
  openapi: string
  info: { version: string; description: string }
  servers: { url: string; description: string }[]
  tags: { name: string }[]
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, { required?: string[]; properties: Record<string, Record<string, unknown>>; example?: unknown }> }
}

// The document does not depend on the store, so one store is enough.
describe('OpenAPI document of v2', () => {
  let text: string
  let doc: Document
  let dir: string

  before(async () => {
    const server = await startTestServer('sqlite', {
      env: { PUBLIC_BASE_URL: 'https://api.example.test/v1', STAGING_BASE_URL: 'https://staging.example.test/edge/v1' },
    })
    const response = await fetch(`${server.origin}/v2/openapi.json`) // no key needed
    assert.equal(response.status, 200)
    assert.equal(response.headers.get('cache-control'), 'public, max-age=300')
    text = await response.text()
    doc = JSON.parse(text) as Document
    dir = mkdtempSync(join(tmpdir(), 'petstore-openapi-v2-'))
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('is version 2.0.0-beta.1, on the configured servers with /v1 replaced by /v2', () => {
    assert.match(doc.openapi, /^3\./)
    assert.equal(doc.info.version, '2.0.0-beta.1')
    assert.deepEqual(doc.servers, [
      { url: 'https://api.example.test/v2', description: 'Production' },
      { url: 'https://staging.example.test/edge/v2', description: 'Staging' },
    ])
    assert.deepEqual(doc.tags.map((tag) => tag.name), ['orders'])
  })

  it('describes listOrders, getOrder and cancelOrder, beta, tagged orders, with summaries and descriptions', () => {
    assert.deepEqual(Object.keys(doc.paths).sort(), ['/store/order-events', '/store/orders', '/store/orders/{orderId}', '/store/orders/{orderId}/cancel'])
    assert.deepEqual(Object.keys(doc.paths['/store/orders']!), ['get'])
    assert.deepEqual(Object.keys(doc.paths['/store/orders/{orderId}']!), ['get'])
    assert.deepEqual(Object.keys(doc.paths['/store/orders/{orderId}/cancel']!), ['post'])
    const list = doc.paths['/store/orders']!.get!
    const get = doc.paths['/store/orders/{orderId}']!.get!
    const cancel = doc.paths['/store/orders/{orderId}/cancel']!.post!
    assert.equal(list.operationId, 'listOrders')
    assert.equal(get.operationId, 'getOrder')
    assert.equal(cancel.operationId, 'cancelOrder')
    for (const op of [list, get, cancel]) {
      assert.equal(op['x-stability'], 'beta')
      assert.deepEqual(op.tags, ['orders'])
      assert.deepEqual(op.security, [{ bearerAuth: [] }])
      assert.ok((op.summary ?? '').length > 0)
      assert.ok((op.description ?? '').length > (op.summary ?? '').length)
    }
    assert.deepEqual(Object.keys(list.responses).sort(), ['200', '400', '401', '403'])
    assert.deepEqual(Object.keys(get.responses).sort(), ['200', '400', '401', '403', '404'])
    assert.deepEqual(get.responses['200']!.content!['application/json']!.schema, { $ref: '#/components/schemas/Order' })
    assert.deepEqual(Object.keys(cancel.responses).sort(), ['200', '204', '400', '401', '403', '404', '409', '415'])
    assert.equal(cancel.responses['204']!.content, undefined, 'a key without orders:read gets no body')
    assert.deepEqual(cancel.responses['200']!.content!['application/json']!.schema, { $ref: '#/components/schemas/Order' })
    assert.deepEqual(Object.keys(cancel.responses['400']!.content!['application/json']!.examples!), ['invalid_order_id', 'invalid_body', 'invalid_parameter'])
  })

  it('documents cancelOrder\'s optional body: only `reason`, one of the five, with an example', () => {
    const body = doc.paths['/store/orders/{orderId}/cancel']!.post!.requestBody!
    assert.equal(body.required, false, 'no body at all is accepted')
    const media = body.content['application/json']!
    assert.deepEqual(media.schema.properties, {
      reason: { type: 'string', enum: [...CANCELLATION_REASONS], description: 'Why the order is cancelled; recorded with the first cancellation only' },
    })
    assert.equal(media.schema.additionalProperties, false)
    assert.equal(media.schema.required, undefined)
    assert.deepEqual(media.example, { reason: 'customer_request' })
    assert.deepEqual(doc.paths['/store/orders/{orderId}/cancel']!.post!.parameters!.map((p) => [p.name, p.in]), [['orderId', 'path']])
  })

  it('documents exactly the query parameters the list validates, from the same schema', () => {
    const parameters = doc.paths['/store/orders']!.get!.parameters!
    assert.deepEqual(parameters.map((p) => p.name), Object.keys(ListOrdersQuery.properties))
    for (const parameter of parameters) {
      assert.equal(parameter.in, 'query')
      assert.equal(parameter.required, false)
      assert.ok((parameter.description ?? '').length > 0, parameter.name)
    }
    const byName = Object.fromEntries(parameters.map((p) => [p.name, p.schema]))
    assert.deepEqual(byName.limit, { type: 'integer', minimum: 1, maximum: 1000, default: 100 })
    assert.deepEqual(byName.petId, { type: 'integer', format: 'int64' })
    assert.equal(byName.status!.default, 'pending,shipped')
    assert.equal(byName.shipDateFrom!.format, 'date-time')
  })

  it('describes listOrderEvents, experimental, with its three parameters, an OrderEvent page and its errors', () => {
    const events = doc.paths['/store/order-events']!
    assert.deepEqual(Object.keys(events), ['get'])
    const op = events.get!
    assert.equal(op.operationId, 'listOrderEvents')
    assert.equal(op['x-stability'], 'experimental')
    assert.deepEqual(op.tags, ['orders'])
    assert.deepEqual(op.security, [{ bearerAuth: [] }])
    assert.ok((op.summary ?? '').length > 0)
    assert.ok((op.description ?? '').length > (op.summary ?? '').length)
    const parameters = op.parameters!
    assert.deepEqual(parameters.map((p) => p.name), Object.keys(ListOrderEventsQuery.properties))
    assert.deepEqual(parameters.map((p) => p.name), ['after', 'limit', 'wait'])
    for (const parameter of parameters) {
      assert.equal(parameter.in, 'query')
      assert.equal(parameter.required, false)
      assert.ok((parameter.description ?? '').length > 0, parameter.name)
    }
    const byName = Object.fromEntries(parameters.map((p) => [p.name, p.schema]))
    assert.deepEqual(byName.after, { type: 'string' })
    assert.deepEqual(byName.limit, { type: 'integer', minimum: 1, maximum: 1000, default: 100 })
    assert.deepEqual(byName.wait, { type: 'integer', minimum: 0, maximum: 30, default: 0 })
    assert.deepEqual(Object.keys(op.responses).sort(), ['200', '400', '401', '403', '410'])
    const page = op.responses['200']!.content!['application/json']!.schema as { required: string[]; properties: Record<string, Record<string, unknown>> }
    assert.deepEqual(page.required, ['data', 'nextCursor'], 'nextCursor is always present')
    assert.deepEqual(page.properties.data!.items, { $ref: '#/components/schemas/OrderEvent' })
    assert.equal(page.properties.nextCursor!.type, 'string')
    assert.deepEqual(Object.keys(op.responses['400']!.content!['application/json']!.examples!), ['invalid_parameter', 'invalid_cursor'])
    assert.deepEqual(Object.keys(op.responses['410']!.content!['application/json']!.examples!), ['events_expired'])

    const event = doc.components.schemas.OrderEvent!
    assert.deepEqual(Object.keys(event.properties), ['id', 'type', 'occurredAt', 'order'])
    assert.deepEqual(event.required, ['id', 'type', 'occurredAt', 'order'])
    assert.equal(event.properties.id!.type, 'string', 'an event id is a decimal string')
    assert.deepEqual(event.properties.type!.enum, ['order.created', 'order.updated', 'order.shipped', 'order.cancelled'])
    assert.equal(event.properties.occurredAt!.format, 'date-time')
    assert.deepEqual(event.properties.order, { $ref: '#/components/schemas/Order' })
    const example = event.example as { id: string; type: string; order: Record<string, unknown> }
    assert.deepEqual(Object.keys(example), ['id', 'type', 'occurredAt', 'order'])
    assert.equal(example.type, 'order.cancelled')
    assert.equal(example.order.status, 'cancelled')
  })

  it('marks every operation but the event feed beta', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const op of Object.values(item)) assert.equal(op['x-stability'], path === '/store/order-events' ? 'experimental' : 'beta', op.operationId)
    }
  })

  it('has the v2 Order (status always, cancelledAt, cancellationReason), OrderEvent and Error with every code, and no v1 schema', () => {
    assert.deepEqual(Object.keys(doc.components.schemas).sort(), ['Error', 'Order', 'OrderEvent'])
    const order = doc.components.schemas.Order!
    assert.deepEqual(Object.keys(order.properties), ['id', 'petId', 'quantity', 'shipDate', 'complete', 'status', 'cancelledAt', 'cancellationReason'])
    assert.deepEqual(order.required, ['id', 'complete', 'status'])
    assert.deepEqual(order.properties.status!.enum, ['pending', 'shipped', 'cancelled'])
    assert.deepEqual(order.properties.cancellationReason!.enum, ['customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other'])
    assert.deepEqual(order.properties.id, { type: 'integer', format: 'int64', description: 'Unique order identifier' })
    assert.deepEqual(doc.components.schemas.Error!.properties.code!.enum, ERROR_CODES)
    for (const code of ERROR_CODES) assert.ok(doc.info.description.includes(`| \`${code}\` | ${ERRORS[code].status} |`), code)
  })

  it('shows every error response with an example of each of its codes', () => {
    const seen = new Set<string>()
    for (const item of Object.values(doc.paths)) {
      for (const op of Object.values(item)) {
        for (const [status, response] of Object.entries(op.responses)) {
          if (Number(status) < 400) continue
          const media = response.content!['application/json']!
          assert.equal(media.schema?.$ref, '#/components/schemas/Error')
          for (const [name, { value }] of Object.entries(media.examples ?? {})) {
            assert.deepEqual(value, { code: name, message: ERRORS[name as keyof typeof ERRORS].message, status: Number(status) })
            seen.add(`${op.operationId} ${status} ${name}`)
          }
        }
      }
    }
    for (const expected of [
      'listOrders 400 invalid_parameter',
      'listOrders 400 invalid_cursor',
      'listOrders 401 unauthorized',
      'listOrders 403 insufficient_scope',
      'getOrder 400 invalid_order_id',
      'getOrder 400 invalid_parameter',
      'getOrder 404 order_not_found',
      'listOrderEvents 400 invalid_parameter',
      'listOrderEvents 400 invalid_cursor',
      'listOrderEvents 401 unauthorized',
      'listOrderEvents 403 insufficient_scope',
      'listOrderEvents 410 events_expired',
    ]) {
      assert.ok(seen.has(expected), expected)
    }
  })

  it('passes `redocly lint` (redocly.yaml) with no error and no warning', async () => {
    const file = join(dir, 'openapi.json')
    writeFileSync(file, text)
    const { stdout } = await promisify(execFile)(process.execPath, [REDOCLY_CLI, 'lint', file, '--config', REDOCLY_CONFIG, '--format=json'], {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      timeout: 120_000,
    }).catch((error: { stdout?: string; stderr?: string }) => assert.fail(`redocly lint failed:\n${error.stdout ?? ''}\n${error.stderr ?? ''}`))
    const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: unknown[] }
    assert.deepEqual(report.totals, { ...report.totals, errors: 0, warnings: 0 }, JSON.stringify(report.problems, null, 2))
  })
})
