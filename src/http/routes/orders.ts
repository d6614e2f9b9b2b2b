import { pipeline, Readable } from 'node:stream'
import { constants as zlib, createBrotliCompress, createGzip } from 'node:zlib'
import { Negotiator } from '@fastify/accept-negotiator'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { FastifyReply, FastifyRequest } from 'fastify'
import Type from 'typebox'
import { ApiError } from '../../errors.js'
import { OrderIdParams, OrderRef } from '../../schemas/order.js'
import { errorResponses } from '../../schemas/error.js'
import type { ApiApp } from '../api-app.js'
import type { JsonPage } from '../../store/store.js'
import { ListCache } from '../list-cache.js'
import { then, type MaybePromise } from '../../maybe-async.js'
import { limitSendTime, sendBody } from '../send-file.js'
import { noneMatchHits, notModified } from '../preconditions.js'
import { textBody } from '../strict-body.js'
import { operation } from './operation.js'

export function ordersRoutes(app: ApiApp): void {
  const { store, metrics } = app
  const { sendTimeoutMs, maxResponses } = app.config.list
  const listCache = new ListCache(app.config.listCacheMaxBytes, app.config.list.databaseStreams)
  let responses = 0 // list responses sent from a file or a fill: each holds at most two send buffers (sendBody)
  app.addHook('onClose', () => listCache.close())

  app.get(
    '/store/orders',
    {
      onRequest: app.requireScope('orders:read'),
      schema: {
        operationId: 'listOrders',
        ...operation('orders', 'stable'),
        summary: 'List all orders',
        description:
          'Returns every order that has not been cancelled, in ascending `id` order, in one response. ' +
          'Filtering and pagination are not supported (planned for v2). Requires the `orders:read` scope.',
        response: {
          200: Type.Array(OrderRef, { description: 'Every order that is not cancelled, ascending id' }),
          ...errorResponses({
            403: 'The API key lacks the `orders:read` scope (`insufficient_scope`)',
          }),
        },
      },
    },
    (request, reply: FastifyReply) => store.orders.dataVersion().then((version) => listOrders(request, reply, version)),
  )

  /** Undefined once sent; a body read from a file or a fill resolves with the reply once under way. */
  function listOrders(request: FastifyRequest, reply: FastifyReply, version: bigint): MaybePromise<FastifyReply | undefined> {
    const encoding = negotiateEncoding(request.headers['accept-encoding'])
    // Strong ETag: one per data version and per encoding (a different representation).
    const etag = encoding === 'identity' ? `"${version}"` : `"${version}-${encoding}"`
    reply.headers({ etag, vary: 'Accept-Encoding', 'cache-control': 'private, no-cache' })
    if (noneMatchHits(request.headers['if-none-match'], etag)) {
      notModified(request, reply)
      return undefined
    }
    reply.type('application/json; charset=utf-8')
    return then(listCache.get(version, encoding), (cached): MaybePromise<FastifyReply | undefined> => {
      if (cached !== undefined && 'buffer' in cached) {
        // One shared buffer, written at once: nothing of its own to bound.
        if (encoding !== 'identity') reply.header('content-encoding', encoding)
        limitSendTime(reply.raw, sendTimeoutMs)
        reply.send(cached.buffer) // Fastify adds its Content-Length
        return undefined
      }
      if (responses >= maxResponses) {
        if (cached !== undefined) cached.fill.release()
        throw new ApiError('service_unavailable', 'Too many lists are being sent; retry shortly.', { 'retry-after': '5' })
      }
      responses++
      reply.raw.once('close', () => responses--)
      if (cached === undefined) return followFill(reply, version, encoding)
      if (encoding !== 'identity') reply.header('content-encoding', encoding)
      reply.header('content-length', cached.bytes)
      const { fill, bytes } = cached
      sendBody(reply, { bytes, read: (buffer, position) => fill.read(buffer, position), close: () => fill.release() }, sendTimeoutMs)
      return undefined
    })
  }

  /**
   * A cache miss: the response follows the fill of its version and encoding, which reads the
   * database at the database's pace, never the client's. Its first bytes are awaited before the
   * status line is sent, so a database failure is still a proper 503 Error; after that, a failure
   * can only cut the body short. The body is chunked, as it was when it streamed from the database.
   */
  async function followFill(reply: FastifyReply, version: bigint, encoding: Encoding): Promise<FastifyReply> {
    const fill = await listCache.follow(version, encoding, () => databaseList(encoding))
    try {
      await fill.started()
    } catch (error) {
      fill.release()
      throw error
    }
    if (encoding !== 'identity') reply.header('content-encoding', encoding)
    sendBody(reply, { bytes: undefined, read: (buffer, position) => fill.read(buffer, position), close: () => fill.release() }, sendTimeoutMs)
    return reply
  }

  /**
   * The list's body in `encoding`, from the database: the route's one read of the list. Pages of
   * JSON text written by the database itself, held equal to this route's schema serializer by
   * test/list-streaming.test.ts. Leaving early (the server closing) returns the cursor.
   */
  async function* databaseList(encoding: Encoding): AsyncGenerator<Buffer[]> {
    const body = jsonArray(store.orders.streamJson()[Symbol.asyncIterator](), encoding === 'identity' ? FILE_WRITE_BYTES : COMPRESSOR_INPUT_BYTES)
    if (encoding === 'identity') return yield* body
    const joined = (async function* () {
      for await (const parts of body) yield join(parts)
    })()
    // pipeline() destroys every stage when the loop below is left early, which returns the cursor.
    for await (const chunk of pipeline(Readable.from(joined, { highWaterMark: 1 }), encoding === 'br' ? brotli() : gzip(), () => {})) yield [chunk as Buffer]
  }

  app.delete(
    '/store/orders/:orderId',
    {
      onRequest: app.requireScope('orders:cancel'),
      preValidation: textBody, // a body is not used, but one that is not JSON is 415, as on every route
      schema: {
        operationId: 'cancelOrder',
        ...operation('orders', 'stable'),
        summary: 'Cancel an order',
        description:
          'Cancels a pending order. An order that has shipped cannot be cancelled (409); an unknown or ' +
          'already cancelled order is 404. The 204 is sent only once the cancellation is durable. ' +
          'Requires the `orders:cancel` scope.',
        params: OrderIdParams,
        response: {
          204: Type.Null({ description: 'Order cancelled; no body' }),
          ...errorResponses({
            400: '`orderId` is not a decimal integer in the int64 range (`invalid_order_id`)',
            403: 'The API key lacks the `orders:cancel` scope (`insufficient_scope`)',
            404: 'The order does not exist or is already cancelled (`order_not_found`)',
            409: 'The order has already shipped and cannot be cancelled (`order_already_shipped`)',
          }),
        },
      },
    },
    async (request, reply) => {
      const { outcome } = await store.orders.cancel(request.params.orderId, request.apiKey!.id).catch((error: unknown) => {
        metrics.cancelled('error')
        throw error
      })
      metrics.cancelled(outcome)
      if (outcome === 'already_shipped') throw new ApiError('order_already_shipped')
      // v1 answers an order cancelled before as one that does not exist (not listed): 404.
      if (outcome !== 'cancelled') throw new ApiError('order_not_found')
      return reply.code(204).send(null)
    },
  )
}

// 2 MiB: on the 1M list, gzip's cache miss took 1.07× the identity one with 512 KiB chunks, 1.18×
// with 128 KiB, 0.98–0.99× with 2 MiB, when gzip was a zlib stream before (npm run bench -- --only
// compression; 4 MiB gained nothing). Each write to a compressor is a trip to the thread pool.
const COMPRESSOR_INPUT_BYTES = 2 * 1024 * 1024
/** The identity list is written to its file in runs of pages of about this size, one writev each. */
const FILE_WRITE_BYTES = 256 * 1024

/**
 * `[`, the pages joined by commas, `]`, in runs of at least `chunkBytes`, yielding to the event loop
 * between pages. A run is the pages as they came, with the brackets and commas as buffers of their
 * own: the identity list is written to its file as such (writev), never copied into one buffer,
 * which would make garbage the size of the list; compressors get each run joined.
 */
async function* jsonArray(pages: AsyncIterator<JsonPage>, chunkBytes: number): AsyncGenerator<JsonPage[]> {
  let pending: JsonPage[] = [OPEN] // not yet yielded
  let pendingBytes = 0
  try {
    for (let page = 0, next = await pages.next(); next.done !== true; page++, next = await pages.next()) {
      if (page > 0) pending.push(COMMA)
      pending.push(next.value)
      pendingBytes += next.value.length
      if (pendingBytes >= chunkBytes) {
        yield pending
        pending = []
        pendingBytes = 0
      }
      await nextTurn() // let small requests run between pages
    }
  } finally {
    await pages.return?.() // left early or finished: release the cursor now
  }
  pending.push(CLOSE)
  yield pending
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

// Large output chunks too: each one is a round trip to the thread pool.
const CHUNKING = { chunkSize: 256 * 1024, highWaterMark: 1024 * 1024 }

/** gzip at level 1, the fastest: a cache miss may take up to 1.5× the identity one (docs/benchmarks.md). */
function gzip(): NodeJS.ReadWriteStream {
  return createGzip({ ...CHUNKING, level: 1 })
}

/** brotli at quality 1 keeps up with the database (see docs/benchmarks.md). */
function brotli(): NodeJS.ReadWriteStream {
  return createBrotliCompress({
    ...CHUNKING,
    params: { [zlib.BROTLI_PARAM_QUALITY]: 1, [zlib.BROTLI_PARAM_MODE]: zlib.BROTLI_MODE_TEXT },
  })
}
