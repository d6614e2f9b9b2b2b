import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { after, before, describe, it } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { ERRORS, V1_ONLY_ERROR_CODES, V2_ERROR_CODES, type ErrorCode } from '../src/errors.js'
import { CANCELLATION_REASONS } from '../src/domain/orders.js'
import { ListOrderEventsQuery } from '../src/schemas/order-event.js'
import { ListOrdersQuery } from '../src/schemas/order-v2.js'
import { DEFAULT_ERROR_CODES, V2_MESSAGES } from '../src/http/openapi-v2.js'
import { DEMO_ORDERS } from '../src/demo/prepare-demo.js'
import { seedDemoData } from '../src/demo/seed-demo-data.js'
import { bearer, startTestServer, type TestServer } from './support/harness.js'

const REDOCLY_CLI = join(dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')), 'bin', 'cli.js')
const REDOCLY_CONFIG = fileURLToPath(new URL('../redocly.yaml', import.meta.url))

interface Parameter {
  name: string
  in: string
  required: boolean
  description?: string
  schema: Record<string, unknown>
  example?: unknown
  examples?: Record<string, { value: unknown }>
}
interface Operation {
  operationId: string
  summary?: string
  description?: string
  tags: string[]
  'x-stability'?: string
  security?: unknown
  parameters?: Parameter[]
  requestBody?: { required: boolean; content: Record<string, { schema: Record<string, unknown>; example?: unknown }> }
  responses: Record<
    string,
    {
      description: string
      headers?: Record<string, { $ref: string }>
      content?: Record<string, { schema?: Record<string, unknown>; examples?: Record<string, { value: { code: string; message: string; status: number } }> }>
    }
  >
}
interface Document {
  openapi: string
  info: { version: string; description: string }
  servers: { url: string; description: string }[]
  tags: { name: string }[]
  paths: Record<string, Record<string, Operation>>
  components: {
    schemas: Record<string, { required?: string[]; properties: Record<string, Record<string, unknown>>; example?: unknown }>
    headers: Record<string, { description: string; schema: Record<string, unknown> }>
  }
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
    assert.deepEqual(doc.tags.map((tag) => tag.name), ['orders', 'webhooks'])
  })

  it('describes listOrders, getOrder and cancelOrder, beta, tagged orders, with summaries and descriptions', () => {
    assert.deepEqual(Object.keys(doc.paths).sort(), [
      '/store/order-events',
      '/store/orders',
      '/store/orders/{orderId}',
      '/store/orders/{orderId}/cancel',
      '/store/orders/{orderId}/complete',
      '/store/orders/{orderId}/ship',
      '/webhook-endpoints',
      '/webhook-endpoints/{endpointId}',
      '/webhook-endpoints/{endpointId}/attempts',
      '/webhook-endpoints/{endpointId}/ping',
      '/webhook-endpoints/{endpointId}/replay',
      '/webhook-endpoints/{endpointId}/rotate-secret',
    ])
    assert.deepEqual(Object.keys(doc.paths['/store/orders']!), ['get', 'post'])
    assert.deepEqual(Object.keys(doc.paths['/store/orders/{orderId}']!), ['get', 'patch'])
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
    assert.deepEqual(Object.keys(list.responses).sort(), ['200', '400', '401', '403', 'default'])
    assert.deepEqual(Object.keys(get.responses).sort(), ['200', '304', '400', '401', '403', '404', '412', 'default'])
    assert.equal(get.responses['304']!.content, undefined, 'a 304 has no body')
    assert.deepEqual(get.responses['304']!.headers!.ETag, { $ref: '#/components/headers/ETag' })
    assert.deepEqual(get.responses['200']!.headers!.ETag, { $ref: '#/components/headers/ETag' })
    assert.deepEqual(get.responses['200']!.content!['application/json']!.schema, { $ref: '#/components/schemas/Order' })
    assert.deepEqual(Object.keys(cancel.responses).sort(), ['200', '204', '400', '401', '403', '404', '409', '412', '415', 'default'])
    assert.equal(cancel.responses['204']!.content, undefined, 'a key without orders:read gets no body')
    assert.deepEqual(cancel.responses['200']!.content!['application/json']!.schema, { $ref: '#/components/schemas/Order' })
    assert.deepEqual(Object.keys(cancel.responses['400']!.content!['application/json']!.examples!), ['invalid_order_id', 'invalid_body', 'invalid_parameter', 'invalid_if_match', 'invalid_if_none_match'])
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
    assert.deepEqual(doc.paths['/store/orders/{orderId}/cancel']!.post!.parameters!.map((p) => [p.name, p.in]), [['orderId', 'path'], ['If-Match', 'header'], ['If-None-Match', 'header']])
  })

  it('describes placeOrder, shipOrder and completeOrder: beta, scope orders:write, every error code of each', () => {
    const operations = operationsOf(doc)
    const errorsOf = (id: string): Record<string, string[]> =>
      Object.fromEntries(
        Object.entries(operations.get(id)!.op.responses)
          .filter(([status]) => status !== 'default' && Number(status) >= 400)
          .map(([status, response]) => [status, Object.keys(response.content!['application/json']!.examples!)]),
      )
    for (const [id, path, success] of [
      ['placeOrder', '/store/orders', '201'],
      ['shipOrder', '/store/orders/{orderId}/ship', '200'],
      ['completeOrder', '/store/orders/{orderId}/complete', '200'],
    ] as const) {
      const { op, method } = { ...operations.get(id)! }
      assert.equal(operations.get(id)!.path, path)
      assert.equal(method, 'post')
      assert.equal(op['x-stability'], 'beta')
      assert.deepEqual(op.tags, ['orders'])
      assert.deepEqual(op.security, [{ bearerAuth: [] }])
      assert.match(op.description ?? '', /`orders:write`/)
      assert.deepEqual(op.responses[success]!.content!['application/json']!.schema, { $ref: '#/components/schemas/Order' })
      assert.ok(op.responses.default !== undefined)
      if (id !== 'placeOrder') {
        // As cancelOrder: a key without orders:read is answered 204, no body.
        assert.equal(op.responses['204']!.content, undefined, id)
        assert.match(op.description ?? '', /without `orders:read`.*204/, id)
      }
    }
    assert.deepEqual(errorsOf('placeOrder'), {
      400: ['invalid_body', 'invalid_parameter', 'invalid_idempotency_key'],
      401: ['unauthorized'],
      403: ['insufficient_scope'],
      409: ['idempotency_key_in_use', 'order_ids_exhausted'],
      415: ['unsupported_media_type'],
      422: ['idempotency_key_reused'],
    })
    assert.deepEqual(errorsOf('shipOrder'), {
      400: ['invalid_order_id', 'invalid_body', 'invalid_parameter', 'invalid_if_match', 'invalid_if_none_match'],
      401: ['unauthorized'],
      403: ['insufficient_scope'],
      404: ['order_not_found'],
      409: ['order_cancelled'],
      412: ['precondition_failed'],
      415: ['unsupported_media_type'],
    })
    assert.deepEqual(errorsOf('updateOrder'), {
      400: ['invalid_order_id', 'invalid_body', 'invalid_parameter', 'invalid_if_match', 'invalid_if_none_match'],
      401: ['unauthorized'],
      403: ['insufficient_scope'],
      404: ['order_not_found'],
      409: ['order_not_pending'],
      412: ['precondition_failed'],
      415: ['unsupported_media_type'],
    })
    assert.deepEqual(errorsOf('completeOrder'), { ...errorsOf('shipOrder'), 409: ['order_cancelled', 'order_not_shipped'] })
    const place = operations.get('placeOrder')!.op
    assert.deepEqual(Object.keys(place.responses['201']!.headers!).sort(), ['ETag', 'Idempotent-Replayed', 'Location', 'RateLimit', 'RateLimit-Policy', 'X-Request-Id'])
    assert.ok('Retry-After' in place.responses['409']!.headers!)
  })

  it("documents placeOrder's body (petId, quantity, shipDate) and its Idempotency-Key header", () => {
    const place = doc.paths['/store/orders']!.post!
    const media = place.requestBody!.content['application/json']!
    assert.deepEqual(Object.keys(media.schema.properties as object), ['petId', 'quantity', 'shipDate', 'metadata'])
    assert.deepEqual(media.schema.required, ['petId', 'quantity'])
    assert.equal(media.schema.additionalProperties, false)
    const properties = media.schema.properties as Record<string, Record<string, unknown>>
    assert.deepEqual([properties.petId!.type, properties.petId!.format, properties.petId!.minimum], ['integer', 'int64', 1])
    assert.deepEqual([properties.quantity!.minimum, properties.quantity!.maximum], [1, 1000])
    assert.equal(properties.shipDate!.format, 'date-time')
    const header = place.parameters!.find((p) => p.in === 'header')!
    assert.equal(header.name, 'Idempotency-Key')
    assert.equal(header.required, false)
    assert.deepEqual([header.schema.minLength, header.schema.maxLength, header.schema.pattern], [1, 255, '^[\\x21-\\x7E]{1,255}$'])
    // No example: /docs would pre-fill it, and a second Execute with another body would be 422.
    assert.equal(exampleOf(header), undefined)
    assert.equal(header.schema.example ?? header.schema.examples, undefined)
    for (const path of ['/store/orders/{orderId}/ship', '/store/orders/{orderId}/complete']) {
      const op = doc.paths[path]!.post!
      assert.deepEqual(op.requestBody!.content['application/json']!.schema.properties, {}, path)
      assert.equal(op.requestBody!.required, false, path)
      assert.deepEqual(op.parameters!.map((p) => [p.name, p.in]).sort(), [['If-Match', 'header'], ['If-None-Match', 'header'], ['orderId', 'path']], path)
    }
  })

  it('marks a body required exactly where the operation refuses a request without one (a required field, or a merge patch)', () => {
    const required = [...operationsOf(doc)].flatMap(([id, { op }]) => (op.requestBody === undefined ? [] : [[id, op.requestBody.required]]))
    assert.deepEqual(Object.fromEntries(required), {
      placeOrder: true,
      updateOrder: true,
      cancelOrder: false,
      shipOrder: false,
      completeOrder: false,
      createWebhookEndpoint: true,
      updateWebhookEndpoint: false,
      rotateWebhookSecret: false,
      replayWebhookEndpoint: true,
      pingWebhookEndpoint: false,
    })
  })

  it("documents updateOrder: a merge patch of petId, quantity, shipDate and metadata, If-Match, and the ETag of every write", () => {
    const update = doc.paths['/store/orders/{orderId}']!.patch!
    assert.equal(update.operationId, 'updateOrder')
    assert.match(update.description ?? '', /`orders:write`/)
    assert.match(update.description ?? '', /without `orders:read`.*204/)
    assert.deepEqual(Object.keys(update.requestBody!.content), ['application/merge-patch+json', 'application/json'])
    const schema = update.requestBody!.content['application/merge-patch+json']!.schema
    assert.deepEqual(Object.keys(schema.properties as object), ['petId', 'quantity', 'shipDate', 'metadata'])
    assert.equal(schema.required, undefined, 'every member is optional')
    assert.equal(schema.additionalProperties, false)
    const properties = schema.properties as Record<string, Record<string, unknown>>
    assert.equal(properties.shipDate!.nullable, true, 'shipDate may be null')
    const metadata = properties.metadata as { maxProperties: number; description: string; additionalProperties: { nullable?: boolean; maxLength?: number } }
    assert.equal(metadata.maxProperties, 50)
    assert.ok(metadata.description.includes('`^[A-Za-z0-9_.:-]{1,40}$`'), metadata.description)
    assert.deepEqual([metadata.additionalProperties.nullable, metadata.additionalProperties.maxLength], [true, 500], 'a metadata key may be set to null')
    const ifMatch = update.parameters!.find((p) => p.name === 'If-Match')!
    assert.deepEqual([ifMatch.in, ifMatch.required], ['header', false])
    assert.deepEqual(Object.keys(update.responses).sort(), ['200', '204', '400', '401', '403', '404', '409', '412', '415', 'default'])
    for (const [id, statuses] of [
      ['updateOrder', ['200', '204', '412']],
      ['shipOrder', ['200', '204', '412']],
      ['completeOrder', ['200', '204', '412']],
      ['cancelOrder', ['200', '204', '412']],
      ['placeOrder', ['201']],
    ] as const) {
      const op = operationsOf(doc).get(id)!.op
      for (const status of statuses) assert.deepEqual(op.responses[status]!.headers!.ETag, { $ref: '#/components/headers/ETag' }, `${id} ${status}`)
      assert.equal(op.responses['400']?.headers?.ETag, undefined, `${id} 400`)
    }
    assert.match(doc.components.headers.ETag!.description, /If-Match/)
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
    assert.deepEqual(byName.after, { type: 'string', pattern: '^(0|[1-9][0-9]{0,18})$' })
    assert.deepEqual(byName.limit, { type: 'integer', minimum: 1, maximum: 1000, default: 100 })
    assert.deepEqual(byName.wait, { type: 'integer', minimum: 0, maximum: 30, default: 0 })
    assert.deepEqual(Object.keys(op.responses).sort(), ['200', '400', '401', '403', '410', 'default'])
    const page = op.responses['200']!.content!['application/json']!.schema as { required: string[]; properties: Record<string, Record<string, unknown>> }
    assert.deepEqual(page.required, ['data', 'nextCursor'], 'nextCursor is always present')
    assert.deepEqual(page.properties.data!.items, { $ref: '#/components/schemas/OrderEvent' })
    assert.equal(page.properties.nextCursor!.type, 'string')
    assert.deepEqual(Object.keys(op.responses['400']!.content!['application/json']!.examples!), ['invalid_parameter', 'invalid_cursor'])
    assert.deepEqual(Object.keys(op.responses['410']!.content!['application/json']!.examples!), ['events_expired'])

    const event = doc.components.schemas.OrderEvent!
    assert.deepEqual(Object.keys(event.properties), ['id', 'type', 'occurredAt', 'order', 'previous'])
    assert.deepEqual(event.required, ['id', 'type', 'occurredAt', 'order'])
    assert.equal(event.properties.id!.type, 'string', 'an event id is a decimal string')
    assert.deepEqual(event.properties.type!.enum, ['order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled'])
    assert.match(event.properties.type!.description as string, /`order\.completed`/)
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

  it('has the v2 Order (status always, cancelledAt, cancellationReason), OrderEvent and Error with every code v2 answers, and no v1 schema', () => {
    assert.deepEqual(Object.keys(doc.components.schemas).sort(), [
      'Error',
      'Order',
      'OrderEvent',
      'WebhookAttempt',
      'WebhookDelivery',
      'WebhookEndpoint',
      'WebhookEndpointCreated',
      'WebhookPingResult',
      'WebhookSecret',
    ])
    const order = doc.components.schemas.Order!
    assert.deepEqual(Object.keys(order.properties), [
      'id',
      'petId',
      'quantity',
      'shipDate',
      'complete',
      'status',
      'shippedAt',
      'completedAt',
      'cancelledAt',
      'cancellationReason',
      'metadata',
      'version',
    ])
    assert.equal(order.properties.shippedAt!.format, 'date-time')
    assert.equal(order.properties.completedAt!.format, 'date-time')
    assert.deepEqual(order.required, ['id', 'complete', 'status', 'version'])
    assert.deepEqual(order.properties.status!.enum, ['pending', 'shipped', 'cancelled'])
    assert.deepEqual(order.properties.cancellationReason!.enum, ['customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other'])
    assert.deepEqual(order.properties.id, { type: 'integer', format: 'int64', description: 'Unique order identifier' })
    assert.deepEqual(doc.components.schemas.Error!.properties.code!.enum, V2_ERROR_CODES)
    for (const code of V2_ERROR_CODES) {
      assert.ok(doc.info.description.includes(`| \`${code}\` | ${ERRORS[code].status} | ${V2_MESSAGES[code] ?? ERRORS[code].message} |`), code)
    }
  })

  it("holds no v1-only text: no v1 message v2 replaces, no code only v1 answers, nothing of v1's pets", () => {
    const found: string[] = []
    const phrases = [
      // v1's messages where v2 sends its own (v2 answers a cancelled order: it is not "not found").
      ...Object.keys(V2_MESSAGES).map((code) => ERRORS[code as ErrorCode].message),
      // The codes only v1 answers (as a JSON string or in backticks), and their messages.
      ...V1_ONLY_ERROR_CODES.flatMap((code) => [`"${code}"`, `\`${code}\``, ERRORS[code].message]),
      'does not exist or has been cancelled',
      'or is already cancelled',
      '/pets/',
      'showPetById',
      'sunset',
    ]
    const lower = text.toLowerCase()
    for (const phrase of phrases) if (lower.includes(phrase.toLowerCase())) found.push(phrase)
    assert.deepEqual(found, [])
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
            const code = name as ErrorCode
            const expected = status === 'default' ? ERRORS[code].status : Number(status)
            assert.deepEqual(value, { code, message: V2_MESSAGES[code] ?? ERRORS[code].message, status: expected })
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

  it('describes the nine webhook endpoint operations, beta, tagged webhooks, scope webhooks:manage, with every error code they send', () => {
    const operations = operationsOf(doc)
    const expected: Record<string, [string, string, string[]]> = {
      createWebhookEndpoint: ['/webhook-endpoints', 'post', ['201', '400', '401', '403', '409', '415', 'default']],
      listWebhookEndpoints: ['/webhook-endpoints', 'get', ['200', '400', '401', '403', 'default']],
      getWebhookEndpoint: ['/webhook-endpoints/{endpointId}', 'get', ['200', '400', '401', '403', '404', 'default']],
      updateWebhookEndpoint: ['/webhook-endpoints/{endpointId}', 'patch', ['200', '400', '401', '403', '404', '415', 'default']],
      deleteWebhookEndpoint: ['/webhook-endpoints/{endpointId}', 'delete', ['204', '400', '401', '403', '404', 'default']],
      rotateWebhookSecret: ['/webhook-endpoints/{endpointId}/rotate-secret', 'post', ['200', '400', '401', '403', '404', '415', 'default']],
      replayWebhookEndpoint: ['/webhook-endpoints/{endpointId}/replay', 'post', ['202', '400', '401', '403', '404', '410', '415', 'default']],
      listWebhookAttempts: ['/webhook-endpoints/{endpointId}/attempts', 'get', ['200', '400', '401', '403', '404', 'default']],
      pingWebhookEndpoint: ['/webhook-endpoints/{endpointId}/ping', 'post', ['200', '400', '401', '403', '404', '409', '415', 'default']],
    }
    for (const [id, [path, method, statuses]] of Object.entries(expected)) {
      const found = operations.get(id)
      assert.ok(found !== undefined, id)
      assert.deepEqual([found.path, found.method], [path, method], id)
      assert.equal(found.op['x-stability'], 'beta', id)
      assert.deepEqual(found.op.tags, ['webhooks'], id)
      assert.match(found.op.description ?? '', /webhooks:manage/, id)
      assert.deepEqual(Object.keys(found.op.responses).sort(), statuses.sort(), id)
      const examples = (status: string) => Object.keys(found.op.responses[status]!.content!['application/json']!.examples!)
      assert.ok(examples('403').includes('insufficient_scope'), id)
      if (path.includes('{endpointId}')) {
        assert.ok(examples('400').includes('invalid_endpoint_id'), id)
        assert.ok(examples('404').includes('webhook_endpoint_not_found'), id)
        const parameter = found.op.parameters!.find((p) => p.name === 'endpointId')!
        assert.deepEqual([parameter.in, parameter.schema.type, parameter.schema.format], ['path', 'integer', 'int64'], id)
      }
    }
    const create = operations.get('createWebhookEndpoint')!.op
    assert.ok(Object.keys(create.responses['400']!.content!['application/json']!.examples!).includes('invalid_webhook_url'))
    assert.deepEqual(Object.keys(create.responses['409']!.content!['application/json']!.examples!), ['webhook_endpoint_limit'])
    assert.deepEqual(create.responses['201']!.content!['application/json']!.schema, { $ref: '#/components/schemas/WebhookEndpointCreated' })
    assert.ok(create.responses['201']!.headers!.Location !== undefined)
    const replay = operations.get('replayWebhookEndpoint')!.op
    assert.deepEqual(Object.keys(replay.responses['410']!.content!['application/json']!.examples!), ['events_expired'])
    // What sends orders to a URL needs orders:read too.
    for (const id of ['createWebhookEndpoint', 'replayWebhookEndpoint', 'updateWebhookEndpoint']) {
      assert.match(operations.get(id)!.op.description ?? '', /`orders:read`/, id)
      assert.match(operations.get(id)!.op.responses['403']!.description ?? '', /`orders:read`/, id)
    }
    // A ping carries no order: webhooks:manage alone.
    const ping = operations.get('pingWebhookEndpoint')!.op
    assert.doesNotMatch(ping.responses['403']!.description ?? '', /orders:read/)
    assert.deepEqual(Object.keys(ping.responses['409']!.content!['application/json']!.examples!), ['ping_in_flight'])
    assert.deepEqual(ping.responses['200']!.content!['application/json']!.schema, { $ref: '#/components/schemas/WebhookPingResult' })
    assert.deepEqual(doc.components.schemas.WebhookPingResult!.required, ['durationMs'])
    assert.deepEqual(Object.keys(doc.components.schemas.WebhookPingResult!.properties), ['status', 'error', 'durationMs'])
    assert.deepEqual(doc.components.schemas.WebhookPingResult!.properties, {
      status: doc.components.schemas.WebhookAttempt!.properties.status,
      error: doc.components.schemas.WebhookAttempt!.properties.error,
      durationMs: doc.components.schemas.WebhookAttempt!.properties.durationMs,
    })
    assert.ok(Object.keys(replay.responses['400']!.content!['application/json']!.examples!).includes('invalid_cursor'))
  })

  it('shows the endpoint without its secret, the secret only in creation and rotation, and the attempt', () => {
    const { WebhookEndpoint, WebhookEndpointCreated, WebhookSecret, WebhookAttempt } = doc.components.schemas
    assert.deepEqual(WebhookEndpoint!.required, ['id', 'url', 'eventTypes', 'status', 'position', 'createdAt'])
    assert.equal(WebhookEndpoint!.properties.secret, undefined)
    assert.deepEqual(Object.keys(WebhookEndpointCreated!.properties), [...Object.keys(WebhookEndpoint!.properties), 'secret'])
    assert.deepEqual(Object.keys(WebhookSecret!.properties), ['secret'])
    assert.deepEqual(WebhookEndpoint!.properties.id, { type: 'integer', format: 'int64', description: "The endpoint's identifier (int64, never reused)" })
    assert.deepEqual(WebhookAttempt!.required, ['eventId', 'attemptedAt', 'durationMs'])
    const secret = new RegExp(WebhookSecret!.properties.secret!.pattern as string)
    assert.match((WebhookSecret!.example as { secret: string }).secret, secret)
    // A schema mentions the secret when it, or a component it refers to, has a field of that name.
    const mentions = (value: unknown, seen = new Set<string>()): boolean => {
      const text = JSON.stringify(value) ?? ''
      if (text.includes('"secret"')) return true
      return [...text.matchAll(/#\/components\/schemas\/(\w+)/g)].some(([, name]) => !seen.has(name!) && mentions(doc.components.schemas[name!], seen.add(name!)))
    }
    for (const [id, { op }] of operationsOf(doc)) {
      const success = Object.entries(op.responses).filter(([status]) => Number(status) < 300)
      const shows = success.some(([, response]) => mentions(response.content?.['application/json']?.schema))
      assert.equal(shows, id === 'createWebhookEndpoint' || id === 'rotateWebhookSecret', id)
    }
  })

  it('documents the delivery as a callback whose example signature standardwebhooks verifies', (t) => {
    const create = doc.paths['/webhook-endpoints']!.post! as Operation & { callbacks: Record<string, Record<string, { post: Operation }>> }
    const delivery = create.callbacks.webhookDelivery!['{$request.body#/url}']!.post
    assert.deepEqual(delivery.requestBody!.content['application/json']!.schema, { $ref: '#/components/schemas/WebhookDelivery' })
    const headers = Object.fromEntries(delivery.parameters!.map((p) => [p.name, String(p.example)]))
    assert.deepEqual(Object.keys(headers), ['webhook-id', 'webhook-timestamp', 'webhook-signature'])
    const example = doc.components.schemas.WebhookDelivery!.example as { timestamp: string; data: { id: string; occurredAt: string } }
    assert.equal(headers['webhook-id'], example.data.id)
    assert.equal(example.timestamp, example.data.occurredAt)
    const secret = (doc.components.schemas.WebhookSecret!.example as { secret: string }).secret
    // standardwebhooks refuses a timestamp five minutes from now: verify at the example's own time.
    t.mock.timers.enable({ apis: ['Date'], now: Number(headers['webhook-timestamp']) * 1000 })
    assert.deepEqual(new Webhook(secret).verify(JSON.stringify(example), headers), example)
    assert.throws(() => new Webhook(secret).verify(JSON.stringify({ ...example, type: 'order.cancelled' }), headers))
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

/** The response headers the document declares, lower-cased as fetch gives them. */
const DECLARABLE = ['idempotent-replayed', 'link', 'location', 'ratelimit', 'ratelimit-policy', 'retry-after', 'www-authenticate', 'x-request-id', 'etag']

/** Each operation by id, with its path and method. */
function operationsOf(doc: Document): Map<string, { path: string; method: string; op: Operation }> {
  const byId = new Map<string, { path: string; method: string; op: Operation }>()
  for (const [path, item] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(item)) byId.set(op.operationId, { path, method, op })
  return byId
}

/** A parameter's example as /docs pre-fills it: `example`, else the first of `examples`. */
function exampleOf(parameter: Parameter): unknown {
  return parameter.example ?? Object.values(parameter.examples ?? {})[0]?.value
}

// What the document says against what the service does, on the demo data `npm start` serves.
describe('the v2 document against the service', () => {
  let server: TestServer
  let limited: TestServer
  let doc: Document
  let key: string

  before(async () => {
    server = await startTestServer('sqlite')
    await seedDemoData(server.store, { orders: DEMO_ORDERS, seed: 1, firstOrderId: 1n })
    doc = (await (await fetch(`${server.origin}/v2/openapi.json`)).json()) as Document
    key = await server.createKey()
    limited = await startTestServer('sqlite', { env: { RATE_LIMIT_PER_KEY: '1' } })
  })

  it('gives every operation a default Error response with an example of each code any request may get', () => {
    for (const { op } of operationsOf(doc).values()) {
      const fallback = op.responses.default
      assert.ok(fallback !== undefined, op.operationId)
      const media = fallback.content!['application/json']!
      assert.equal(media.schema?.$ref, '#/components/schemas/Error')
      assert.deepEqual(Object.keys(media.examples!), [...DEFAULT_ERROR_CODES])
      for (const status of [413, 429, 500, 503]) assert.ok(Object.values(media.examples!).some(({ value }) => value.status === status), `${op.operationId} ${status}`)
      for (const code of DEFAULT_ERROR_CODES) assert.ok(fallback.description.includes(`\`${code}\``), code)
    }
  })

  it("shows order_not_found with v2's message, the one getOrder and cancelOrder send", async () => {
    const sent = [
      await fetch(`${server.origin}/v2/store/orders/987654321`, { headers: bearer(key) }),
      await fetch(`${server.origin}/v2/store/orders/987654321/cancel`, { method: 'POST', headers: bearer(key) }),
    ]
    const operations = operationsOf(doc)
    for (const [response, id] of [[sent[0]!, 'getOrder'], [sent[1]!, 'cancelOrder']] as const) {
      assert.equal(response.status, 404)
      const body = (await response.json()) as unknown
      assert.deepEqual(operations.get(id)!.op.responses['404']!.content!['application/json']!.examples!.order_not_found!.value, body, id)
      assert.deepEqual(doc.components.schemas.Error!.example, body, 'the Error schema example')
    }
  })

  it("declares on the event feed's `after` the pattern the service enforces", async () => {
    const after = operationsOf(doc).get('listOrderEvents')!.op.parameters!.find((p) => p.name === 'after')!
    const pattern = new RegExp(after.schema.pattern as string)
    for (const value of ['0', '1', '999', '01', '-1', '+1', '1e3', '1.0', ' 1', 'abc', '', '0x10', '10000000000000000000']) {
      const response = await fetch(`${server.origin}/v2/store/order-events?after=${encodeURIComponent(value)}`, { headers: bearer(key) })
      const body = (await response.json()) as { code?: string }
      if (pattern.test(value)) assert.equal(response.status, 200, `${value}: ${JSON.stringify(body)}`)
      else assert.deepEqual([response.status, body.code], [400, 'invalid_cursor'], value)
    }
  })

  it('answers each example, sent as it is, with 2xx and data, as /docs pre-fills it', async () => {
    const operations = operationsOf(doc)
    const query = (id: string): string => {
      const parameters = operations.get(id)!.op.parameters!.filter((p) => p.in === 'query' && exampleOf(p) !== undefined)
      // A deepObject parameter (the metadata filter) is sent as /docs sends it: `name[KEY]=VALUE` per key.
      const pairs = parameters.flatMap((p): [string, string][] => {
        const example = exampleOf(p)
        return typeof example === 'object' && example !== null ? Object.entries(example).map(([k, v]) => [`${p.name}[${k}]`, String(v)]) : [[p.name, String(example)]]
      })
      return new URLSearchParams(pairs).toString()
    }
    const get = async (path: string) => {
      const response = await fetch(`${server.origin}/v2${path}`, { headers: bearer(key) })
      return { status: response.status, body: (await response.json()) as { data: { id: number; status: string }[] } }
    }
    // The list: its examples filter nothing away that the list without parameters shows.
    const list = await get(`/store/orders?${query('listOrders')}`)
    assert.equal(list.status, 200, JSON.stringify(list.body))
    assert.ok(list.body.data.length > 0)
    assert.deepEqual(list.body, (await get('/store/orders')).body, 'the examples narrow the list')
    // The event feed, its wait included (events follow the example `after`: no wait at all).
    const events = await get(`/store/order-events?${query('listOrderEvents')}`)
    assert.equal(events.status, 200, JSON.stringify(events.body))
    assert.ok(events.body.data.length > 0)
    // cancelOrder's body example, on a pending order of the demo.
    const pending = list.body.data.find((order) => order.status === 'pending')!
    const example = operations.get('cancelOrder')!.op.requestBody!.content['application/json']!.example
    const cancelled = await fetch(`${server.origin}/v2/store/orders/${pending.id}/cancel`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify(example),
    })
    assert.equal(cancelled.status, 200)
    assert.equal(((await cancelled.json()) as { status: string }).status, 'cancelled')
    // placeOrder's body example, with a fresh Idempotency-Key as /docs sends it (the header has no
    // example); shipOrder's and completeOrder's orderId examples.
    const placeOp = operations.get('placeOrder')!.op
    const placed = await fetch(`${server.origin}/v2/store/orders`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json', 'idempotency-key': randomUUID() },
      body: JSON.stringify(placeOp.requestBody!.content['application/json']!.example),
    })
    assert.equal(placed.status, 201, await placed.clone().text())
    assert.equal(((await placed.json()) as { status: string }).status, 'pending')
    for (const [id, status, complete] of [['shipOrder', 'shipped', false], ['completeOrder', 'shipped', true]] as const) {
      const { path, op } = operations.get(id)!
      const orderId = String(exampleOf(op.parameters!.find((p) => p.name === 'orderId')!))
      const before = (await (await fetch(`${server.origin}/v2/store/orders/${orderId}`, { headers: bearer(key) })).json()) as { status: string; complete: boolean }
      assert.deepEqual([before.status, before.complete], id === 'shipOrder' ? ['pending', false] : ['shipped', false], `${id}: the example is an order it changes`)
      const answer = await fetch(`${server.origin}/v2${path.replace('{orderId}', orderId)}`, { method: 'POST', headers: bearer(key) })
      assert.equal(answer.status, 200, id)
      const after = (await answer.json()) as { status: string; complete: boolean }
      assert.deepEqual([after.status, after.complete], [status, complete], id)
    }
  })

  it('declares each header on the responses that send it, and sends each one declared', async () => {
    const [readOnly, cancelOnly, expired] = await Promise.all([
      server.createKey({ scopes: ['orders:read'] }),
      server.createKey({ scopes: ['orders:cancel'] }),
      server.createKey({ expiresAt: new Date(Date.now() - 60_000) }),
    ])
    const { data } = (await (await fetch(`${server.origin}/v2/store/orders?status=pending&limit=2`, { headers: bearer(key) })).json()) as { data: { id: number }[] }
    const shipped = ((await (await fetch(`${server.origin}/v2/store/orders?status=shipped&limit=1`, { headers: bearer(key) })).json()) as { data: { id: number }[] }).data[0]!.id
    const json = { 'content-type': 'application/json' }
    type Sent = [operationId: string, origin: string, path: string, init?: RequestInit]
    const o = server.origin
    const requests: Sent[] = [
      ['listOrders', o, '/store/orders?limit=1', { headers: bearer(key) }],
      ['listOrders', o, '/store/orders?limit=1000', { headers: bearer(key) }],
      ['listOrders', o, '/store/orders?limit=0', { headers: bearer(key) }],
      ['listOrders', o, `/store/orders?petId=${'1'.repeat(5000)}`, { headers: bearer(key) }],
      ['getOrder', o, `/store/orders/${data[0]!.id}`, { headers: bearer(readOnly) }],
      ['getOrder', o, '/store/orders/abc', { headers: bearer(key) }],
      ['getOrder', o, '/store/orders/987654321', { headers: bearer(key) }],
      ['cancelOrder', o, `/store/orders/${data[1]!.id}/cancel`, { method: 'POST', headers: bearer(cancelOnly) }],
      ['cancelOrder', o, '/store/orders/abc/cancel', { method: 'POST', headers: bearer(key) }],
      ['cancelOrder', o, '/store/orders/987654321/cancel', { method: 'POST', headers: bearer(key) }],
      ['cancelOrder', o, `/store/orders/${shipped}/cancel`, { method: 'POST', headers: bearer(key) }],
      ['cancelOrder', o, `/store/orders/${data[1]!.id}/cancel`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'text/plain' }, body: 'x' }],
      ['cancelOrder', o, `/store/orders/${data[1]!.id}/cancel`, { method: 'POST', headers: { ...bearer(key), ...json }, body: JSON.stringify({ reason: 'x'.repeat(20_000) }) }],
      ['placeOrder', o, '/store/orders', { method: 'POST', headers: { ...bearer(key), ...json, 'idempotency-key': 'doc-headers' }, body: '{"petId": 1, "quantity": 1}' }],
      ['placeOrder', o, '/store/orders', { method: 'POST', headers: { ...bearer(key), ...json, 'idempotency-key': 'doc-headers' }, body: '{"petId": 1, "quantity": 1}' }],
      ['placeOrder', o, '/store/orders', { method: 'POST', headers: { ...bearer(key), ...json, 'idempotency-key': 'doc-headers' }, body: '{"petId": 1, "quantity": 2}' }],
      ['placeOrder', o, '/store/orders', { method: 'POST', headers: { ...bearer(key), ...json, 'idempotency-key': ' ' }, body: '{"petId": 1, "quantity": 2}' }],
      ['placeOrder', o, '/store/orders', { method: 'POST', headers: { ...bearer(key), 'content-type': 'text/plain' }, body: 'x' }],
      ['shipOrder', o, `/store/orders/${data[0]!.id}/ship`, { method: 'POST', headers: bearer(key) }],
      ['shipOrder', o, '/store/orders/987654321/ship', { method: 'POST', headers: bearer(key) }],
      ['completeOrder', o, `/store/orders/${shipped}/complete`, { method: 'POST', headers: bearer(key) }],
      ['completeOrder', o, `/store/orders/${data[1]!.id}/complete`, { method: 'POST', headers: bearer(key) }],
      ['getOrder', o, `/store/orders/${data[0]!.id}`, { headers: { ...bearer(key), 'if-none-match': '*' } }],
      ['updateOrder', o, `/store/orders/${data[1]!.id}`, { method: 'PATCH', headers: { ...bearer(key), ...json }, body: '{"metadata": {"doc": "headers"}}' }],
      ['updateOrder', o, `/store/orders/${data[1]!.id}`, { method: 'PATCH', headers: { ...bearer(cancelOnly), ...json }, body: '{}' }],
      ['updateOrder', o, `/store/orders/${data[1]!.id}`, { method: 'PATCH', headers: { ...bearer(key), ...json, 'if-match': '"999"' }, body: '{}' }],
      ['shipOrder', o, `/store/orders/${data[1]!.id}/ship`, { method: 'POST', headers: { ...bearer(key), 'if-match': '"999"' } }],
      ['listOrderEvents', o, '/store/order-events?after=10&limit=5', { headers: bearer(key) }],
      ['listOrderEvents', o, '/store/order-events?after=x', { headers: bearer(key) }],
    ]
    for (const [id, { path, method }] of operationsOf(doc)) {
      const url = path.replace('{orderId}', String(data[0]!.id))
      const verb = method.toUpperCase()
      requests.push([id, o, url, { method: verb }])
      requests.push([id, o, url, { method: verb, headers: bearer(expired) }])
      requests.push([id, o, url, { method: verb, headers: bearer(id === 'cancelOrder' ? readOnly : cancelOnly) }])
      // A limit of one request a minute per key: the second request of a key is 429.
      const once = await limited.createKey()
      for (let i = 0; i < 2; i++) requests.push([id, limited.origin, url.replace(/\/\d+/, '/1'), { method: verb, headers: bearer(once) }])
    }

    const operations = operationsOf(doc)
    const seen = new Map<string, Set<string>>() // operation and response (status or default) → headers sent
    for (const [id, origin, path, init] of requests) {
      const response = await fetch(`${origin}/v2${path}`, init)
      await response.arrayBuffer()
      const { op } = operations.get(id)!
      const status = String(response.status)
      const declaredAs = op.responses[status] !== undefined ? status : 'default'
      const declared = Object.keys(op.responses[declaredAs]!.headers ?? {}).map((name) => name.toLowerCase())
      const sent = DECLARABLE.filter((name) => response.headers.has(name))
      for (const name of sent) assert.ok(declared.includes(name), `${id} ${status}: ${name} is sent but not declared on ${declaredAs}`)
      const key = `${id} ${declaredAs}`
      seen.set(key, new Set([...(seen.get(key) ?? []), ...sent]))
    }
    // Every response exercised above sends, in one request or another, each header it declares.
    for (const [key, names] of seen) {
      const [id, declaredAs] = key.split(' ') as [string, string]
      for (const name of Object.keys(operations.get(id)!.op.responses[declaredAs]!.headers ?? {})) {
        assert.ok(names.has(name.toLowerCase()), `${key}: ${name} is declared but never sent`)
      }
    }
    for (const expected of ['listOrders 200', 'listOrders 400', 'listOrders 401', 'listOrders 403', 'listOrders default', 'getOrder 404', 'cancelOrder 409', 'cancelOrder 415', 'cancelOrder default', 'listOrderEvents 200', 'placeOrder 201', 'placeOrder 422', 'shipOrder 200', 'completeOrder 409', 'getOrder 304', 'updateOrder 200', 'updateOrder 412', 'shipOrder 412']) {
      assert.ok(seen.has(expected), expected)
    }
    for (const name of Object.keys(doc.components.headers)) assert.ok(doc.components.headers[name]!.description.length > 0, name)
  })
})
