import type { FastifyReply, FastifyRequest } from 'fastify'
import { ORDER_STATUSES, type OrderStatus } from '../../../domain/orders.js'
import { metadataFilter, type OrderFilters } from '../../../domain/order-pages.js'
import { ApiError } from '../../../errors.js'
import { errorResponses } from '../../../schemas/error.js'
import { ReadConditionHeaders, ListOrdersQuery, NoQuery, OrderIdV2Params, OrderPage, OrderV2Ref, toApiOrderV2 } from '../../../schemas/order-v2.js'
import { etag, matchFails, noneMatchHits, notModified, preconditionFailed } from '../../preconditions.js'
import type { ApiApp } from '../../api-app.js'
import { Cursors } from '../../cursor.js'
import { operation } from '../operation.js'
import { INVALID_CONDITIONS } from './order-write.js'

// An OrderPage around the data array, as its serializer writes it (data first, nextCursor last).
const DATA = Buffer.from('{"data":')
const END = Buffer.from('}')

const NO_READ_SCOPE = 'The API key lacks the `orders:read` scope (`insufficient_scope`)'

/** v2's reads: pages of orders with filters, and one order, each with its status. */
export function ordersV2Routes(app: ApiApp): void {
  const { store } = app
  // The secret never changes once migrated: read on first use, again only after a failed read.
  let cursors: Promise<Cursors> | undefined
  const getCursors = (): Promise<Cursors> =>
    (cursors ??= store.cursorSecret().then(
      (secret) => new Cursors(secret),
      (error: unknown) => {
        cursors = undefined
        throw error
      },
    ))

  app.get(
    '/store/orders',
    {
      onRequest: app.requireScope('orders:read'),
      schema: {
        operationId: 'listOrders',
        ...operation('orders', 'beta'),
        summary: 'List orders, a page at a time, with filters',
        description:
          'Returns the orders matching every filter given, in ascending `id` order, at most `limit` of them. ' +
          'By default the orders that are not cancelled, as in v1. `nextCursor` is present exactly when more ' +
          'matching orders follow; the next page is also linked in `Link: <…>; rel="next"` (a URL relative to ' +
          'this host). A walk over every page while orders change never returns an order twice and never skips ' +
          'one that matched the filters for the whole walk. Unknown, repeated or invalid query parameters are ' +
          'refused (400 `invalid_parameter`, naming the parameter). Requires the `orders:read` scope.',
        querystring: ListOrdersQuery,
        response: {
          200: { ...OrderPage, description: 'A page of orders, ascending id' },
          ...errorResponses({
            400:
              'A query parameter is unknown, repeated or invalid, or `shipDateFrom` is not before `shipDateTo` ' +
              '(`invalid_parameter`); or the cursor is altered, not from this API, or was issued for other filters (`invalid_cursor`)',
            403: NO_READ_SCOPE,
          }),
        },
      },
    },
    async (request, reply) => {
      const query = request.query
      const filters = toFilters(query)
      const cursors = await getCursors()
      const after = query.cursor === undefined ? undefined : cursors.decode(query.cursor, filters)
      const limit = query.limit ?? 100
      // The database writes the page's JSON, byte for byte what the OrderPage schema's serializer
      // would (test/v2-page-json.test.ts), and tells whether another matching order follows.
      const page = await store.orders.pageJson({ filters, after, limit })
      if (!page.more) return sendJson(reply, Buffer.concat([DATA, page.json, END]))
      const nextCursor = cursors.encode(filters, page.lastId!)
      reply.header('link', `<${nextPageUrl(request, nextCursor)}>; rel="next"`)
      return sendJson(reply, Buffer.concat([DATA, page.json, Buffer.from(`,"nextCursor":${JSON.stringify(nextCursor)}}`)]))
    },
  )

  app.get(
    '/store/orders/:orderId',
    {
      onRequest: app.requireScope('orders:read'),
      schema: {
        operationId: 'getOrder',
        ...operation('orders', 'beta'),
        summary: 'Show an order',
        description:
          'Returns the order with its status, cancelled orders included, and its version as `ETag`. With `If-None-Match` ' +
          'holding that ETag, 304 and no body while the order has not changed; with `If-Match`, 412 unless the order is at ' +
          'a version it names. Requires the `orders:read` scope.',
        headers: ReadConditionHeaders,
        params: OrderIdV2Params,
        querystring: NoQuery,
        response: {
          200: { ...OrderV2Ref, description: 'The order' },
          304: { type: 'null', description: 'The order is still at the version `If-None-Match` names; no body' },
          ...errorResponses({
            400:
              '`orderId` is not a decimal integer in the int64 range (`invalid_order_id`); a query parameter was sent ' +
              '(`invalid_parameter`); ' + INVALID_CONDITIONS,
            403: NO_READ_SCOPE,
            404: 'No order has this id (`order_not_found`)',
            412: 'The order is at a version `If-Match` does not name (`precondition_failed`): the message and the `ETag` header name the current one',
          }),
        },
      },
    },
    async (request, reply) => {
      const record = await store.orders.find(request.params.orderId)
      if (record === undefined) throw new ApiError('order_not_found', 'No order has this id.')
      const current = etag(record.version)
      reply.header('etag', current)
      // RFC 9110 §13.2.2: If-Match first, then If-None-Match.
      if (matchFails(request.headers['if-match'], current)) throw preconditionFailed(record.version, `The order is at version ${record.version} (ETag ${current}), not one If-Match names.`)
      if (noneMatchHits(request.headers['if-none-match'], current)) return notModified(request, reply)
      return toApiOrderV2(record)
    },
  )
}

/** A body already serialized: sent as it is, as the route's serializer would have sent it. */
function sendJson(reply: FastifyReply, body: Buffer): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(body)
}

/** The validated query's filters, in canonical form (statuses in a fixed order, once each; metadata keys sorted). */
function toFilters(query: ListOrdersQuery): OrderFilters {
  const given = new Set((query.status ?? 'pending,shipped').split(','))
  const filters: OrderFilters = { statuses: ORDER_STATUSES.filter((status: OrderStatus) => given.has(status)) }
  if (query.petId !== undefined) filters.petId = query.petId
  if (query.complete !== undefined) filters.complete = query.complete
  // strict-query.ts has made them instants as stored (toISOString), which compare as text.
  if (query.shipDateFrom !== undefined) filters.shipDateFrom = query.shipDateFrom
  if (query.shipDateTo !== undefined) filters.shipDateTo = query.shipDateTo
  if (filters.shipDateFrom !== undefined && filters.shipDateTo !== undefined && filters.shipDateFrom >= filters.shipDateTo) {
    throw new ApiError('invalid_parameter', 'shipDateTo must be later than shipDateFrom.')
  }
  // strict-query.ts has checked each key and value (order-metadata.ts) and their number.
  if (query.metadata !== undefined) filters.metadata = metadataFilter(query.metadata)
  return filters
}

/**
 * The next page's URL: this request's path and parameters, in their order, with the new cursor. A
 * path-absolute reference (RFC 8288 §3.2 resolves it against the request's URL): it holds behind
 * any proxy that keeps the path, and never echoes a Host header nobody vouched for.
 */
function nextPageUrl(request: FastifyRequest, cursor: string): string {
  const [path, search = ''] = request.url.split('?', 2) as [string, string?]
  const params = new URLSearchParams(search)
  params.set('cursor', cursor)
  return `${path}?${params.toString()}`
}
