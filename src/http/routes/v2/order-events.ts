import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyReply } from 'fastify'
import { EventsExpiredError, parseEventPosition, UnknownEventPositionError, type OrderEventsPage } from '../../../domain/order-events.js'
import { ApiError } from '../../../errors.js'
import type { EventWaiters } from '../../../events/event-waiters.js'
import { errorResponses } from '../../../schemas/error.js'
import { ListOrderEventsQuery, OrderEventPage } from '../../../schemas/order-event.js'
import type { ApiApp } from '../../api-app.js'
import { keyExpired, type Authenticator } from '../../authenticator.js'
import { operation } from '../operation.js'

/**
 * A held request is answered this long before the server's idle timeout would close its socket
 * (HTTP_IDLE_TIMEOUT_MS): a wait longer than that is shortened, never cut off.
 */
const IDLE_MARGIN_MS = 1000

/**
 * v2's order event feed (docs/order-events.md): the changes to orders in the order they were
 * committed, a page at a time from a cursor, optionally long-polled.
 */
export function orderEventsRoute(app: ApiApp, waiters: EventWaiters, authenticator: Authenticator): void {
  const { store, config } = app
  const longestHoldMs = Math.max(0, config.http.idleTimeoutMs - IDLE_MARGIN_MS)

  const read = (after: bigint | undefined, limit: number): Promise<OrderEventsPage> =>
    store.events.read(after, limit).catch((error: unknown) => {
      throw feedCursorError(error, after, 'read the feed again without after')
    })

  app.get(
    '/store/order-events',
    {
      onRequest: app.requireScope('orders:read'),
      schema: {
        operationId: 'listOrderEvents',
        ...operation('orders', 'experimental'),
        summary: 'Follow the changes to orders, a page at a time',
        description:
          'Returns the events after `after` (a `nextCursor`, or an event\'s `id`), at most `limit` of them, in the order ' +
          'their changes were committed: `order.created` (placeOrder, or an import of a new order), `order.updated` ' +
          '(updateOrder, with `previous`: the fields it changed as they were, or an import), `order.shipped`, ' +
          '`order.completed` and `order.cancelled` (through v1 or v2), each with the order as it was right after the ' +
          'change. `nextCursor` is ' +
          'always present: resume from it, and every event is received exactly once, each order\'s events in the order ' +
          'they happened, with no gap, whichever instance committed them. Without `after`, the feed starts at the ' +
          'oldest event still retained.\n\n' +
          'Long polling: with `wait` (seconds, up to 30), a request after which no event follows yet is held until an ' +
          'event is committed — it is answered within about a second — or until the wait ends, with an empty `data` and ' +
          'the same `nextCursor`. A request may be answered before its wait ends with an empty page (the instance is ' +
          'shutting down, or holds as many requests as it may and gives this one\'s slot to a key holding fewer): ask ' +
          'again with the same `after`. A key revoked or expiring during the hold is answered 401, not the event.\n\n' +
          'Events are kept for a retention period (30 days by default); a cursor older than the oldest retained event ' +
          'is 410 `events_expired`. Unknown, repeated or invalid query parameters are refused (400 `invalid_parameter`, ' +
          'naming the parameter). Experimental: the shape may still change. Requires the `orders:read` scope.',
        querystring: ListOrderEventsQuery,
        response: {
          200: { ...OrderEventPage, description: 'The events after the cursor, and where to resume' },
          ...errorResponses({
            400:
              'A query parameter is unknown, repeated or invalid (`invalid_parameter`); or `after` is not a cursor of ' +
              'this feed: malformed, or past its end (`invalid_cursor`)',
            401: 'The API key is missing, malformed, unknown, expired or revoked (`unauthorized`), also when it expires or is revoked while the request is held',
            403: 'The API key lacks the `orders:read` scope (`insufficient_scope`)',
            410: 'Events after `after` have been deleted by retention (`events_expired`): read the feed again without `after`',
          }),
        },
      },
    },
    async (request, reply) => {
      const { query } = request
      const after = query.after === undefined ? undefined : afterPosition(query.after)
      const limit = query.limit ?? 100
      const holdMs = Math.min((query.wait ?? 0) * 1000, longestHoldMs)
      // The version is read before the feed: a commit after it either is in the page or moves it.
      let seen = holdMs > 0 ? await store.orders.dataVersion() : 0n
      let page = await read(after, limit)
      if (page.count === 0 && holdMs > 0) {
        // A hold never outlives its key: one that expires first ends it, with a 401.
        const keyExpiresAt = request.apiKey!.expiresAt?.getTime() ?? Infinity
        const keyLeftMs = keyExpiresAt - Date.now()
        const endsWithKey = keyLeftMs <= holdMs
        const deadline = performance.now() + Math.min(holdMs, keyLeftMs)
        const gone = new AbortController()
        const onClose = (): void => gone.abort()
        reply.raw.once('close', onClose)
        if (request.raw.socket?.destroyed !== false) gone.abort() // it went while the feed was read
        try {
          while (page.count === 0) {
            const outcome = await waiters.wait(seen, deadline - performance.now(), gone.signal, String(request.apiKey!.id))
            // Shutting down: the connection is closed once answered, not left idle for the drain to wait out.
            if (outcome === 'closing') reply.header('connection', 'close')
            if (outcome === 'closing' || outcome === 'gone') break
            // Woken after a while: the key may have been revoked or have expired meanwhile (401).
            if (outcome === 'timeout' && endsWithKey) {
              // A timer is set from the event loop's clock, read when its turn began: it can fire a
              // few milliseconds before its time. The key is valid until its expiresAt, to the ms.
              for (let early = keyExpiresAt - Date.now(); early > 0; early = keyExpiresAt - Date.now()) await sleep(early)
              throw keyExpired()
            }
            await authenticator.recheck(request.headers.authorization, 'orders:read')
            if (typeof outcome !== 'object') break // the time is up, or the slot went to another key: what there is
            seen = outcome.changed
            page = await read(page.next, limit)
          }
        } finally {
          reply.raw.off('close', onClose)
        }
      }
      return sendPage(reply, page)
    },
  )
}

/** `after` of the feed or of a replay: a position this feed wrote (a nextCursor or an event's id); anything else is invalid_cursor. */
export function afterPosition(text: string): bigint {
  try {
    return parseEventPosition(text)
  } catch {
    throw new ApiError('invalid_cursor', 'after must be a nextCursor or an event id of this feed: a decimal position such as 1042.')
  }
}

/** The feed's refusals of a cursor `after` as the API answers them; `remedy` says what to do about a 410. */
export function feedCursorError(error: unknown, after: bigint | undefined, remedy: string): unknown {
  if (error instanceof EventsExpiredError) return new ApiError('events_expired', `Events after ${after} have been deleted by retention; ${remedy}.`)
  if (error instanceof UnknownEventPositionError) return new ApiError('invalid_cursor', 'after is past the end of the feed: it is not a cursor of this feed.')
  return error
}

// The page as the OrderEventPage schema's serializer would write it, around the store's own bytes.
const DATA = Buffer.from('{"data":')

function sendPage(reply: FastifyReply, page: OrderEventsPage): FastifyReply {
  const end = Buffer.from(`,"nextCursor":"${page.next}"}`)
  return reply.type('application/json; charset=utf-8').send(Buffer.concat([DATA, page.json, end]))
}
