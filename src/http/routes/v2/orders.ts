import type { FastifyReply, FastifyRequest } from 'fastify'
import { ORDER_STATUSES, type OrderStatus } from '../../../domain/orders.js'
import { toApiOrderV2, type OrderFilters } from '../../../domain/order-pages.js'
import { ApiError } from '../../../errors.js'
import { errorResponses } from '../../../schemas/error.js'
import { ListOrdersQuery, NoQuery, OrderIdV2Params, OrderPage, OrderV2Ref } from '../../../schemas/order-v2.js'
import type { ApiApp } from '../../api-app.js'
import type { Run } from '../../read-ahead.js'
import { Cursors } from '../../cursor.js'
import type { OrderPageJson } from '../../../store/store.js'

// An OrderPage around the data array, as its serializer writes it (data first, nextCursor last).
const DATA = Buffer.from('{"data":')
const END = Buffer.from('}')

const UNAUTHORIZED = 'The API key is missing, malformed, unknown, expired or revoked (`unauthorized`)'
const NO_READ_SCOPE = 'The API key lacks the `orders:read` scope (`insufficient_scope`)'

const pageKey = (cursor: string | undefined, limit: number): string => `orders ${cursor} ${limit}`

/** v2's reads: pages of orders with filters, and one order, each with its status. */
export function ordersV2Routes(app: ApiApp): void {
  const { store, readAhead } = app
  // A page read ahead is used only while no order has changed since (the data version it was read
  // at is still the current one): a walk then never sees a page older than a change it could know of.
  type PageAhead = { version: bigint; page: OrderPageJson }
  // A run of pages read ahead, each under the cursor that asks for it (the one that names the order before it).
  const pagesAfter = async (filters: OrderFilters, after: bigint, limit: number): Promise<Run> => {
    const version = await store.orders.dataVersion() // before the pages: a change after it moves it
    const pages = await store.orders.pagesJson({ filters, after, limit }, readAhead.pagesPerRun)
    const cursors = await getCursors()
    const { more, lastId } = pages.at(-1)!
    return {
      pages: pages.map((page, i) => ({ key: pageKey(cursors.encode(filters, i === 0 ? after : pages[i - 1]!.lastId!), limit), page: { version, page } })),
      readNext: more ? readFrom(filters, lastId!, limit) : undefined,
    }
  }
  // Its own scope, so that a run held for its `readNext` does not keep the pages already answered.
  const readFrom = (filters: OrderFilters, after: bigint, limit: number) => () => pagesAfter(filters, after, limit)
  const isCurrent = async (ahead: PageAhead): Promise<boolean> => ahead.version === (await store.orders.dataVersion())
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
        tags: ['orders'],
        summary: 'List orders, a page at a time, with filters',
        description:
          'Returns the orders matching every filter given, in ascending `id` order, at most `limit` of them. ' +
          'By default the orders that are not cancelled, as in v1. `nextCursor` is present exactly when more ' +
          'matching orders follow; the next page is also linked in `Link: <…>; rel="next"` (a URL relative to ' +
          'this host). A walk over every page while orders change never returns an order twice and never skips ' +
          'one that matched the filters for the whole walk. Unknown, repeated or invalid query parameters are ' +
          'refused (400 `invalid_parameter`, naming the parameter). Requires the `orders:read` scope.',
        security: [{ bearerAuth: [] }],
        'x-stability': 'beta',
        querystring: ListOrdersQuery,
        response: {
          200: { ...OrderPage, description: 'A page of orders, ascending id' },
          ...errorResponses({
            400:
              'A query parameter is unknown, repeated or invalid, or `shipDateFrom` is not before `shipDateTo` ' +
              '(`invalid_parameter`); or the cursor is altered, not from this API, or was issued for other filters (`invalid_cursor`)',
            401: UNAUTHORIZED,
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
      const holder = String(request.apiKey!.id)
      const ahead = request.method === 'GET' ? await readAhead.take<PageAhead>(holder, pageKey(query.cursor, limit), isCurrent) : undefined
      const page = ahead?.page.page ?? (await store.orders.pageJson({ filters, after, limit }))
      if (!page.more) return sendJson(reply, Buffer.concat([DATA, ...page.json, END]))
      const nextCursor = cursors.encode(filters, page.lastId!)
      reply.header('link', `<${nextPageUrl(request, nextCursor)}>; rel="next"`)
      sendJson(reply, Buffer.concat([DATA, ...page.json, Buffer.from(`,"nextCursor":${JSON.stringify(nextCursor)}}`)]))
      // A walk (this page came from a cursor) asks for the next page next. The cursor is bound to the
      // filters (a request with others is refused above), so it and the limit name that page.
      if (query.cursor !== undefined && request.method === 'GET') {
        const lastId = page.lastId!
        readAhead.start(holder, pageKey(nextCursor, limit), () => pagesAfter(filters, lastId, limit), ahead?.after)
      }
      return reply
    },
  )

  app.get(
    '/store/orders/:orderId',
    {
      onRequest: app.requireScope('orders:read'),
      schema: {
        operationId: 'getOrder',
        tags: ['orders'],
        summary: 'Show an order',
        description: 'Returns the order with its status, cancelled orders included. Requires the `orders:read` scope.',
        security: [{ bearerAuth: [] }],
        'x-stability': 'beta',
        params: OrderIdV2Params,
        querystring: NoQuery,
        response: {
          200: { ...OrderV2Ref, description: 'The order' },
          ...errorResponses({
            400: '`orderId` is not a decimal integer in the int64 range (`invalid_order_id`); a query parameter was sent (`invalid_parameter`)',
            401: UNAUTHORIZED,
            403: NO_READ_SCOPE,
            404: 'No order has this id (`order_not_found`)',
          }),
        },
      },
    },
    async (request) => {
      const record = await store.orders.find(request.params.orderId)
      if (record === undefined) throw new ApiError('order_not_found', 'No order has this id.')
      return toApiOrderV2(record)
    },
  )
}

/** A body already serialized: sent as it is, as the route's serializer would have sent it. */
function sendJson(reply: FastifyReply, body: Buffer): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(body)
}

/** The validated query's filters, in canonical form (statuses in a fixed order, once each). */
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
