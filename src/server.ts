import type { AddressInfo } from 'node:net'
import pino from 'pino'
import { buildApp } from './app.js'
import type { Config } from './config.js'
import type { ApiApp } from './http/api-app.js'
import { EventPruner } from './pruning/event-pruner.js'
import { checkListenAddress, listenError } from './listen-address.js'
import { queryValuesRedacted } from './log-redaction.js'
import { IdempotencyKeyPruner } from './pruning/idempotency-key-pruner.js'
import { withoutCredentials } from './redact-url.js'
import { openStore } from './store/open-store.js'
import { OutageLog } from './outage-log.js'
import { RETRY_EVERY_MS, untilAvailable } from './store/until-available.js'
import { traceLogFields } from './tracing/log-fields.js'
import { traceStoreOperations } from './tracing/store-spans.js'
import type { Tracing } from './tracing/sdk.js'
import type { Store } from './store/store.js'
import type { SqliteStoreOptions } from './store/sqlite/sqlite-store.js'
import { unknownVariableWarning, type UnknownVariable } from './unknown-variables.js'
import { Deliverer } from './webhooks/delivery.js'
import { WebhookDispatcher } from './webhooks/dispatcher.js'
import { DeliveryPacer } from './webhooks/pacer.js'

export const SERVER_SQLITE_OPTIONS = { busyTimeoutMs: 50 }

/**
 * The store as `serve` opens it: SQLite never waiting on the event loop for another process's write
 * lock (SERVER_SQLITE_OPTIONS, unless `sqlite` says otherwise), PostgreSQL's request statements
 * bounded by DATABASE_QUERY_TIMEOUT_MS.
 */
export function openServerStore(config: Config, sqlite: SqliteStoreOptions = SERVER_SQLITE_OPTIONS): Promise<Store> {
  return openStore(config.database, sqlite, { queryTimeoutMillis: config.databaseQueryTimeoutMs })
}

export interface RunningServer {
  app: ApiApp
  url: string
  /**
   * Stops accepting, answers held long polls at once, finishes in-flight requests (up to the
   * shutdown timeout), stops pruning events and idempotency keys, lets webhook deliveries in flight
   * finish (up to the shutdown timeout, then aborts them) and releases their leases, closes the
   * database.
   */
  close(): Promise<void>
  /** Writes every log line logged so far (a failed write is reported on stderr). */
  flushLogs(): Promise<void>
}

export interface ServerOptions {
  /** Variables that look like settings but are not: a warning each in the log, first thing. */
  unknownVariables?: UnknownVariable[]
  onListening?: (url: string) => void
  /** Runs on the migrated store before the server listens (`serve --demo` seeds it there). */
  prepare?: (store: Store) => Promise<void>
  /** Aborted by a stop signal: a start waiting for its database gives up (untilAvailable). */
  signal?: AbortSignal
}

/** Where the server's log lines go: pino writes them; `flush(cb)` calls back once they are written. */
export interface LogDestination extends pino.DestinationStream {
  flush(callback: (error?: Error) => void): void
}

/**
 * Where the server's log lines go: `fd` (stdout), written asynchronously once 4 KiB are held or
 * every 250 ms, so a request does not cost a system call of its own (a full pipe is waited out).
 * pino writes whatever is left synchronously when the process exits (an uncaught error and
 * `process.exit()` included): only a SIGKILL can lose the last quarter second. A failed write stops
 * logging, said on stderr, never the server.
 */
export function logDestination(fd = 1): LogDestination {
  const sonic = pino.destination({ dest: fd, sync: false, minLength: 4096, periodicFlush: 250 })
  let stopped = false
  // The first failed write stops logging, as pino does for a closed pipe, and is reported: left
  // alone, sonic-boom would try the same lines again at every flush, and at exit. destroy() drops
  // the lines it holds, its timer and its flush at exit (and closes `fd` unless it is stdout or
  // stderr); lines logged after it are dropped here, as a destroyed SonicBoom throws at a write.
  // The listener stays: closing the descriptor may fail too, and an 'error' unheard would throw.
  sonic.on('error', (error: Error) => {
    if (stopped) return
    stopped = true
    process.stderr.write(`petstore-orders: log lines could not be written, logging stopped: ${error.message}\n`)
    sonic.destroy()
  })
  return {
    write: (line: string) => {
      if (!stopped) sonic.write(line)
    },
    flush: (callback) => (stopped ? callback() : sonic.flush(callback)),
  }
}

export function serverLogger(level: Config['logLevel'], destination: LogDestination = logDestination(), traced = false): pino.Logger {
  return pino(
    {
      level,
      // With tracing on, a line logged inside a span names it (trace_id, span_id).
      ...(traced ? { mixin: traceLogFields } : {}),
      // Fastify's request serializer does not log headers; this keeps keys out even if a future one does.
      redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
      // Nor a query string's values, wherever a URL appears in a line.
      ...queryValuesRedacted,
    },
    destination,
  )
}

/** Owns the process side of the service: logger, store, listening socket, signals. */
export async function startServer(config: Config, options: ServerOptions = {}): Promise<RunningServer> {
  await checkListenAddress(config.host, config.port)
  const destination = logDestination()
  const logger = serverLogger(config.logLevel, destination, config.tracing !== undefined)
  for (const unknown of options.unknownVariables ?? []) logger.warn({ variable: unknown.name }, unknownVariableWarning(unknown))
  // Before the store opens: pg is patched as it is first loaded. Loaded only when on.
  let tracing: Tracing | undefined
  if (config.tracing !== undefined) tracing = await (await import('./tracing/sdk.js')).startTracing(config.tracing, logger)
  // A database that is unavailable for a while (restarting, another process's write lock) is waited
  // for, said in the log, rather than exiting into a supervisor's restart limit.
  const waits = new OutageLog(logger, {
    failing: `the database is unavailable; trying again every ${RETRY_EVERY_MS / 1000} s until it answers (SIGTERM stops)`,
    answering: 'the database answers; starting',
  })
  const opened = await untilAvailable(() => openServerStore(config), waits, options.signal).catch(async (error: unknown) => {
    await tracing?.shutdown()
    throw error
  })
  // PostgreSQL's statements are traced by instrumentation-pg; SQLite's operations by our spans.
  const store = tracing !== undefined && opened.kind === 'sqlite' ? traceStoreOperations(opened, 'sqlite') : opened
  // Webhook deliveries, the dispatcher's and the API's pings alike; closed once both are done.
  const deliverer = new Deliverer(config.webhooks)
  let app: ApiApp | undefined
  let url: string
  try {
    const applied = await untilAvailable(() => store.migrate(), waits, options.signal)
    if (applied.length > 0) logger.info({ applied }, 'database migrated')
    await options.prepare?.(store)
    app = await buildApp({ config, store, logger, processMetrics: true, deliverer, traced: tracing !== undefined })
    url = await app.listen({ host: config.host, port: config.port }).catch((error: unknown) => {
      throw listenError(error, config.host, config.port)
    })
  } catch (error) {
    // An open pool or Redis connection would keep the process alive after the failure.
    await app?.close()
    deliverer.close()
    await store.close()
    await tracing?.shutdown()
    throw error
  }
  const running = app
  // One line that says what this instance is doing; the password of a URL never appears in it.
  logger.info(
    {
      store: store.location,
      listen: running.addresses().map(hostAndPort).join(', '),
      tracing: config.tracing === undefined ? 'off' : `${config.tracing.protocol} to ${withoutCredentials(config.tracing.endpoint)}`,
      webhookConcurrency: config.webhooks.concurrency,
    },
    'started',
  )
  options.onListening?.(url)
  // Retention of the order event feed, in the serving process only (the CLI never prunes).
  const pruner = new EventPruner(store.events, {
    retentionDays: config.events.retentionDays,
    log: logger,
    databaseOutage: running.databaseOutage,
  })
  pruner.start()
  // Expired Idempotency-Key records of placeOrder, likewise on every instance.
  const keyPruner = new IdempotencyKeyPruner(store.orders, { log: logger, databaseOutage: running.databaseOutage })
  keyPruner.start()
  // Webhook deliveries, shared with every other instance through leases in the database.
  const pacer = new DeliveryPacer()
  running.server.on('request', () => pacer.request())
  pacer.start()
  const dispatcher = new WebhookDispatcher({
    webhooks: store.webhooks,
    dataVersion: () => store.orders.dataVersion(),
    deliver: (request, signal) => deliverer.deliver(request, signal),
    timeoutMs: config.webhooks.timeoutMs,
    retryScheduleMs: config.webhooks.retryScheduleMs,
    maxInFlight: config.webhooks.concurrency,
    log: logger,
    databaseOutage: running.databaseOutage,
    metrics: running.metrics,
    pace: () => pacer.turn(),
  })
  running.metrics.watchWebhookLag(() => store.webhooks.lag())
  dispatcher.start()

  let closing: Promise<void> | undefined
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      // Fastify stops accepting and waits for in-flight requests; requests still arriving on open
      // connections are served with Connection: close. A connection whose request finishes goes
      // idle: close those as they appear rather than waiting out the keep-alive timeout. The
      // shutdown timeout bounds a client that never finishes reading a long list.
      const reaper = setInterval(() => running.server.closeIdleConnections(), 100)
      const timer = setTimeout(() => running.server.closeAllConnections(), config.shutdownTimeoutMs)
      const pruned = Promise.all([pruner.stop(), keyPruner.stop()]) // a pass in progress ends after its current batch
      const dispatched = dispatcher.stop(config.shutdownTimeoutMs).finally(() => pacer.stop())
      try {
        await running.close()
      } finally {
        clearInterval(reaper)
        clearTimeout(timer)
        await pruned
        await dispatched
        deliverer.close() // after the dispatcher's last delivery and the API's last ping
        await store.close()
        await tracing?.shutdown() // the last spans exported
      }
    })())
  const flushLogs = (): Promise<void> =>
    new Promise((resolve) =>
      // A failed write is reported by the destination itself; the error this may be called with is
      // the fsync sonic-boom ends a flush with, which a pipe or a terminal refuses (EINVAL).
      destination.flush(() => resolve()),
    )
  return { app: running, url, close, flushLogs }
}

/** An address a server listens on, as `HOST:PORT` (`[::1]:8080` for IPv6), or a socket's path. */
function hostAndPort(address: AddressInfo | string): string {
  if (typeof address === 'string') return address
  return address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`
}

/** `petstore-orders serve`: run until SIGTERM or SIGINT, then shut down gracefully and exit 0. */
export async function serve(config: Config, options: ServerOptions = {}): Promise<void> {
  // Listened for before starting: once "listening" is printed, a signal must stop the server
  // gracefully, and one that came during start-up stops it as soon as it has started. Listened for
  // until the server is closed: a Ctrl-C under `npm start` arrives twice (from the terminal, and
  // forwarded by npm), and the second must not kill a shutdown in progress (it is bounded by
  // SHUTDOWN_TIMEOUT_MS anyway).
  let stop!: (signal: NodeJS.Signals) => void
  const starting = new AbortController()
  const signalled = new Promise<NodeJS.Signals>((resolve) => {
    stop = (signal) => {
      resolve(signal)
      starting.abort()
    }
  })
  process.on('SIGTERM', stop).on('SIGINT', stop)
  try {
    let server: RunningServer
    try {
      server = await startServer(config, { ...options, signal: starting.signal })
    } catch (error) {
      if (starting.signal.aborted) return // stopped while waiting for its database: nothing was started
      throw error
    }
    server.app.log.info({ signal: await signalled }, 'shutting down')
    await server.close()
    server.app.log.info('stopped')
    // Written before returning: the process then ends with nothing left to write (the exit
    // listener would still write it, synchronously).
    await server.flushLogs()
    // Everything is closed and written. A socket its peer never closes (a stalled database proxy
    // that ignores the end of the connection) would keep the process alive for ever: it ends a
    // second later regardless, with the exit code set by then.
    setTimeout(() => process.exit(), 1000).unref()
  } finally {
    process.off('SIGTERM', stop).off('SIGINT', stop)
  }
}
