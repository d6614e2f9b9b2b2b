// The order event feed's follower: `events()` long polls the feed, resuming each poll from the
// last response's cursor, and retries a poll while the server is away.
import type { OrderEvent, OrderEventPage } from './api-types.js'
import { decodeEventsPage } from './decode.js'
import type { operations as operationsV2 } from './openapi-v2-types.js'
import { int64Text } from './request-values.js'
import { isTransient, pause, retryDelay } from './retries.js'
import { readJson, type Call, type RequestOptions } from './transport.js'

type ListOrderEventsQuery = NonNullable<operationsV2['listOrderEvents']['parameters']['query']>

export interface EventsOptions extends RequestOptions {
  /**
   * The events after this cursor: a response's `nextCursor`, an event's `id`, or a stream's
   * `cursor`; a bigint position too. Omitted: from the oldest event the server retains.
   */
  after?: string | bigint
  /** How many events one request returns at most, 1–1000 (the server's default is 100). */
  limit?: number
  /** Seconds a request may be held while no event follows the cursor, 0–30 (default 20). */
  wait?: number
  /**
   * Called before each retry, with the failure and the delay before the retry. It may log; it may
   * throw to give up, and the loop then throws that error.
   */
  onRetry?: (retry: EventsRetry) => void
}

/** A failed request of `events()` that will be retried. */
export interface EventsRetry {
  /** A PetstoreApiError (429, 502, 503, 504), or the error of a request that got no response. */
  error: unknown
  /** 1 for the first retry since the last response that succeeded. */
  attempt: number
  /** How long until the retry: `Retry-After` when the response had one, else the backoff. */
  delayMs: number
  /** The cursor the retry resumes from (undefined: from the oldest retained event). */
  cursor: string | undefined
}

/** The async iterator `events()` returns, with the cursor to resume from. */
export interface OrderEventStream extends AsyncIterableIterator<OrderEvent> {
  /**
   * Where to resume: the position after the last event yielded (its `id`), or after the last empty
   * poll; before the first response, the `after` given (undefined when none was).
   */
  readonly cursor: string | undefined
}

/** Default `wait`: well under the idle timeouts of usual proxies and load balancers (60 s). */
const DEFAULT_EVENTS_WAIT_SECONDS = 20
/** A poll with no answer this long after its `wait` has ended is given up and retried (a dead connection). */
const POLL_GRACE_MS = 15_000
/** An empty page that came back sooner than this is not followed at once (`wait: 0`, a server stopping). */
const EMPTY_POLL_INTERVAL_MS = 1000

/** `events()`: long polls, each resuming from the previous response's `nextCursor`, retried while the server is away. */
export function followEvents(call: Call, options: EventsOptions): OrderEventStream {
  const { limit, wait = DEFAULT_EVENTS_WAIT_SECONDS, signal, onRetry } = options
  if (typeof wait !== 'number' || !Number.isFinite(wait) || wait < 0) throw new TypeError('events: wait must be a number of seconds, 0–30')
  let cursor = options.after === undefined ? undefined : int64Text(options.after, 'events: after')

  async function poll(after: string | undefined): Promise<OrderEventPage> {
    const params: { [K in keyof ListOrderEventsQuery]: string } = { wait: String(wait) }
    if (after !== undefined) params.after = after
    if (limit !== undefined) params.limit = String(limit)
    const query = new URLSearchParams(params as Record<string, string>)
    // One signal for the request and its body: the caller's abort, or no answer in time.
    const controller = new AbortController()
    const onAbort = (): void => controller.abort(signal?.reason)
    signal?.addEventListener('abort', onAbort, { once: true })
    const timer = setTimeout(() => controller.abort(new PollTimeoutError(wait * 1000 + POLL_GRACE_MS)), wait * 1000 + POLL_GRACE_MS)
    try {
      // Bounded by its own timer, not the client's timeoutMs: a long poll waits on purpose.
      const response = await call('GET', `store/order-events?${query.toString()}`, controller.signal, undefined, undefined, Infinity)
      return decodeEventsPage(await readJson(response), response)
    } finally {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
  }

  const aborted = (): boolean => signal?.aborted === true

  async function* follow(): AsyncGenerator<OrderEvent, undefined, undefined> {
    let failures = 0
    while (!aborted()) {
      const started = Date.now()
      let page: OrderEventPage
      try {
        page = await poll(cursor)
      } catch (error) {
        if (aborted()) return undefined
        if (!isTransient(error)) throw error
        failures++
        const delayMs = retryDelay(error, failures)
        onRetry?.({ error, attempt: failures, delayMs, cursor })
        if (!(await pause(delayMs, signal))) return undefined
        continue
      }
      failures = 0
      for (const event of page.data) {
        if (aborted()) return undefined
        yield event
        // Only once the loop asks for the next event: the one it stopped on (break, throw) is not
        // counted as handled, so resuming from `cursor` delivers it again rather than skip it.
        cursor = event.id
      }
      cursor = page.nextCursor
      if (page.data.length === 0 && !(await pause(EMPTY_POLL_INTERVAL_MS - (Date.now() - started), signal))) return undefined
    }
    return undefined
  }

  const generator = follow()
  return {
    get cursor() {
      return cursor
    },
    next: () => generator.next(),
    return: (value?: unknown) => generator.return(value as undefined),
    throw: (error?: unknown) => generator.throw(error),
    [Symbol.asyncIterator]() {
      return this
    },
  }
}

/** A poll that got no answer in time: retried like a connection refused. */
class PollTimeoutError extends Error {
  constructor(ms: number) {
    super(`no answer from the server within ${ms} ms`)
    this.name = 'PollTimeoutError'
  }
}
