import { pipeline, Readable, Transform } from 'node:stream'
import { constants as zlib, createBrotliCompress } from 'node:zlib'
import { Negotiator } from '@fastify/accept-negotiator'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { FastifyReply, FastifyRequest } from 'fastify'
import Type from 'typebox'
import { ApiError } from '../../errors.js'
import { OrderIdParams, OrderRef } from '../../schemas/order.js'
import { errorResponses } from '../../schemas/error.js'
import type { ApiApp } from '../api-app.js'
import type { JsonPage } from '../../store/store.js'
import { ListCache, type ListCollector } from '../list-cache.js'
import { GzipSegments } from '../gzip-segments.js'
import { then, type MaybePromise } from '../../maybe-async.js'
import { sendFile } from '../send-file.js'

export function ordersRoutes(app: ApiApp): void {
  const { store, metrics } = app
  const listCache = new ListCache(app.config.listCacheMaxBytes)
  const gzipSegments = new GzipSegments(app.config.gzipSegmentsMaxBytes, (outcome) => metrics.gzipSegment(outcome))
  app.addHook('onClose', (_app, done) => {
    listCache.close()
    done()
  })

  app.get(
    '/store/orders',
    {
      onRequest: app.requireScope('orders:read'),
      schema: {
        operationId: 'listOrders',
        tags: ['orders'],
        summary: 'List all orders',
        description:
          'Returns every order that has not been cancelled, in ascending `id` order, in one response. ' +
          'Filtering and pagination are not supported (planned for v2). Requires the `orders:read` scope.',
        security: [{ bearerAuth: [] }],
        'x-stability': 'stable',
        response: {
          200: Type.Array(OrderRef, { description: 'Every order that is not cancelled, ascending id' }),
          ...errorResponses({
            401: 'The API key is missing, malformed, unknown, expired or revoked (`unauthorized`)',
            403: 'The API key lacks the `orders:read` scope (`insufficient_scope`)',
          }),
        },
      },
    },
    // Without a promise when the version and the list are in memory (SQLite, small lists).
    (request, reply: FastifyReply) => then(store.orders.dataVersion(), (version) => listOrders(request, reply, version)),
  )

  /** Undefined once sent; the streamed and file bodies resolve with the reply once it has finished. */
  function listOrders(request: FastifyRequest, reply: FastifyReply, version: bigint): MaybePromise<FastifyReply | undefined> {
    const encoding = negotiateEncoding(request.headers['accept-encoding'])
    // Strong ETag: one per data version and per encoding (a different representation).
    const etag = encoding === 'identity' ? `"${version}"` : `"${version}-${encoding}"`
    reply.headers({ etag, vary: 'Accept-Encoding', 'cache-control': 'private, no-cache' })
    if (matchesIfNoneMatch(request.headers['if-none-match'], etag)) {
      reply.code(304).send()
      return undefined
    }
    reply.type('application/json; charset=utf-8')
    return then(listCache.get(version, encoding), (cached): MaybePromise<FastifyReply | undefined> => {
      if (cached === undefined) return streamList(reply, version, encoding)
      if (encoding !== 'identity') reply.header('content-encoding', encoding)
      if ('buffer' in cached) {
        reply.send(cached.buffer) // Fastify adds its Content-Length
        return undefined
      }
      reply.header('content-length', cached.bytes)
      sendFile(reply, cached.file, cached.bytes)
      return undefined
    })
  }

  async function streamList(reply: FastifyReply, version: bigint, encoding: Encoding): Promise<FastifyReply> {
    // Pages of JSON text written by the database itself, held equal to this route's schema
    // serializer by test/list-streaming.test.ts. The first page is read before the status line
    // is sent, so a database failure is still a proper 503 Error; after that, a failure can only
    // cut the stream short.
    const pages = store.orders.streamJson()[Symbol.asyncIterator]()
    const first = await pages.next()
    if (encoding !== 'identity') reply.header('content-encoding', encoding)
    try {
      return reply.send(listBody(pages, first, version, encoding))
    } catch (error) {
      await returnCursor(pages) // open from here on, and no body will read it to the end
      throw error
    }
  }

  /** The list's body stream from its first page on, in `encoding`, filling the cache on the way. */
  function listBody(pages: AsyncIterator<JsonPage>, first: IteratorResult<JsonPage>, version: bigint, encoding: Encoding): NodeJS.ReadableStream {
    // brotli gets large chunks, the socket and the gzip segmenter the pages as they came (see
    // jsonArray). At most two chunks wait ahead of brotli (Readable.from buffers 16 items by default).
    const stages: (NodeJS.ReadableStream | NodeJS.ReadWriteStream)[] =
      encoding === 'br'
        ? [Readable.from(jsonArray(first, pages, BROTLI_INPUT_BYTES), { highWaterMark: 2 }), brotli()]
        : encoding === 'gzip'
          ? [Readable.from(gzipSegments.encode(jsonArray(first, pages, 0)), { highWaterMark: 2 })]
          : [Readable.from(jsonArray(first, pages, 0))]
    // A client gone before the body's first read destroys it before jsonArray has started, so its
    // `finally` would never return the cursor: return it here too (a no-op once jsonArray has).
    stages[0]!.once('close', () => void returnCursor(pages))
    const collector = listCache.collector(version, encoding)
    if (collector !== undefined) stages.push(tee(collector))
    // pipeline() destroys every stage when the client goes away, which returns the cursor.
    return stages.length === 1 ? stages[0]! : (pipeline(stages as never, () => {}) as NodeJS.ReadWriteStream) // ends with the tee
  }

  app.delete(
    '/store/orders/:orderId',
    {
      onRequest: app.requireScope('orders:cancel'),
      schema: {
        operationId: 'cancelOrder',
        tags: ['orders'],
        summary: 'Cancel an order',
        description:
          'Cancels a pending order. An order that has shipped cannot be cancelled (409); an unknown or ' +
          'already cancelled order is 404. The 204 is sent only once the cancellation is durable. ' +
          'Requires the `orders:cancel` scope.',
        security: [{ bearerAuth: [] }],
        'x-stability': 'stable',
        params: OrderIdParams,
        response: {
          204: Type.Null({ description: 'Order cancelled; no body' }),
          ...errorResponses({
            400: '`orderId` is not a decimal integer in the int64 range (`invalid_order_id`)',
            401: 'The API key is missing, malformed, unknown, expired or revoked (`unauthorized`)',
            403: 'The API key lacks the `orders:cancel` scope (`insufficient_scope`)',
            404: 'The order does not exist or is already cancelled (`order_not_found`)',
            409: 'The order has already shipped and cannot be cancelled (`order_already_shipped`)',
          }),
        },
      },
    },
    async (request, reply) => {
      const outcome = await store.orders.cancel(request.params.orderId, request.apiKey!.id).catch((error: unknown) => {
        metrics.cancelled('error')
        throw error
      })
      metrics.cancelled(outcome)
      if (outcome === 'already_shipped') throw new ApiError('order_already_shipped')
      if (outcome === 'not_found') throw new ApiError('order_not_found')
      return reply.code(204).send(null)
    },
  )
}

// 2 MiB: on the 1M list, gzip's cache miss took 1.07× the identity one with 512 KiB chunks, 1.18×
// with 128 KiB, 0.98–0.99× with 2 MiB, when gzip was a zlib stream too (npm run bench -- --only
// compression; 4 MiB gained nothing).
const BROTLI_INPUT_BYTES = 2 * 1024 * 1024

/**
 * `[`, the pages joined by commas, `]`, yielding to the event loop between pages. For the identity
 * body and gzip's segmenter (`chunkBytes` 0) brackets and commas are written on their own and each
 * page as it came: concatenating them would copy every page once more, garbage the size of the list,
 * which was most of a stream's memory when measured. For brotli, pages are joined into chunks of at
 * least `chunkBytes`: each of its writes is a trip to the thread pool, and large ones compress faster.
 */
async function* jsonArray(first: IteratorResult<JsonPage>, rest: AsyncIterator<JsonPage>, chunkBytes: number): AsyncGenerator<JsonPage> {
  let next = first
  let pending: JsonPage[] = [OPEN] // not yet yielded
  let pendingBytes = 0
  try {
    for (let page = 0; next.done !== true; page++) {
      if (page > 0) pending.push(COMMA)
      pending.push(next.value)
      pendingBytes += next.value.length
      if (pendingBytes >= chunkBytes) {
        if (chunkBytes === 0) yield* pending
        else yield join(pending)
        pending = []
        pendingBytes = 0
      }
      await nextTurn() // let small requests run between pages
      next = await rest.next()
    }
  } finally {
    await rest.return?.() // the client went away or we finished: release the cursor now
  }
  pending.push(CLOSE)
  yield join(pending)
}

/**
 * Ends the store's iteration early, releasing its cursor (a no-op once it has ended). A failure to
 * release is not reported here: the error already being handled, or jsonArray, reports it.
 */
function returnCursor(pages: AsyncIterator<JsonPage>): Promise<unknown> {
  return pages.return?.().catch(() => {}) ?? Promise.resolve()
}

const OPEN = Buffer.from('[')
const COMMA = Buffer.from(',')
const CLOSE = Buffer.from(']')

function join(parts: JsonPage[]): Buffer {
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts)
}

type Encoding = 'gzip' | 'br' | 'identity'
// Server preference on equal q: br at quality 1 is both faster and smaller than gzip at level 1
// on this JSON (1M orders: 153 ms → 8.1 MB against 202 ms → 10.9 MB, one core).
const negotiator = new Negotiator<Encoding>({ supportedValues: ['br', 'gzip', 'identity'] })

function negotiateEncoding(header: string | undefined): Encoding {
  return header === undefined || header === '' ? 'identity' : (negotiator.negotiate(header) ?? 'identity')
}

/** brotli at quality 1 keeps up with the database (see docs/benchmarks.md); gzip is GzipSegments. */
function brotli(): NodeJS.ReadWriteStream {
  // Large output chunks too: each one is a round trip to the thread pool.
  const chunking = { chunkSize: 256 * 1024, highWaterMark: 1024 * 1024 }
  return createBrotliCompress({
    ...chunking,
    params: { [zlib.BROTLI_PARAM_QUALITY]: 1, [zlib.BROTLI_PARAM_MODE]: zlib.BROTLI_MODE_TEXT },
  })
}

/** RFC 9110 §13.1.2: weak comparison against each listed tag, or `*`. */
function matchesIfNoneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  return header.split(',').some((candidate) => {
    const tag = candidate.trim()
    return tag === '*' || tag.replace(/^W\//, '') === etag
  })
}

function tee(collector: ListCollector): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      collector.add(chunk)
      callback(null, chunk)
    },
    flush(callback) {
      collector.finish()
      callback()
    },
    destroy(error, callback) {
      collector.abort() // after finish(), a no-op; before it, the body is incomplete
      callback(error)
    },
  })
}
