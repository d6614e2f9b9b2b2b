import { setTimeout as sleep } from 'node:timers/promises'
import type pg from 'pg'
import { isUnavailable } from './errors.js'
import { oncePerTurn } from '../../once-per-turn.js'

/** The channel every data_version bump notifies, with the new version as its payload. */
export const VERSION_CHANNEL = 'petstore_orders_data_version'

/**
 * How stale `current()` may be, in milliseconds: a version served from memory comes from a read of
 * data_version that started at most this long ago, or is newer (a notification, or this instance's
 * own change). So a change committed by anyone else is seen at most this long after its COMMIT —
 * normally within milliseconds, when its NOTIFY arrives.
 */
export const MAX_STALENESS_MS = 1000
/** Past this age a version is still served, but a read is started in the background to renew it. */
export const RENEW_AFTER_MS = MAX_STALENESS_MS / 2
/** Connection attempts of the listener are at least this far apart (they are made on demand). */
const RECONNECT_INTERVAL_MS = 1000
/**
 * A statement on the listener's connection that takes longer than this gives the listener up (its
 * client's query_timeout): a half-open connection would otherwise hold the re-read for ever.
 */
export const LISTENER_QUERY_TIMEOUT_MS = 2000
const READ_VERSION = 'SELECT version::text AS version FROM data_version WHERE id = 1'

const VERSION_TEXT = /^[0-9]{1,19}$/

/**
 * The latest data_version, kept in memory so that `dataVersion()` costs no round trip.
 *
 * One dedicated connection LISTENs on VERSION_CHANNEL; every bump NOTIFYs the new version in its own
 * transaction, and PostgreSQL delivers a notification at COMMIT. Whenever the listener is not
 * connected and listening, every call reads the version from the database (so it fails, as
 * StoreUnavailableError, when the database is down), and the listener is reconnected on demand.
 * While it listens, the version is also read again at least every MAX_STALENESS_MS, on the
 * listener's own connection (so the pool's load does not delay it, and the read also proves that
 * connection alive), so a lost or late notification (a half-open connection, a writer that does not
 * notify) cannot keep an old version for longer than that. This instance's own changes are applied
 * (`observe`) before they are acknowledged, so its own cancels are never served stale.
 */
export class VersionWatcher {
  private known: bigint | undefined
  /** performance.now() until which `known` may be served without a read. */
  private freshUntil = 0
  private listener: pg.Client | undefined
  private listening = false
  /** Changes whenever the listener is lost or (re)established: a read spanning one does not count. */
  private epoch = 0
  private lastAttempt = -Infinity
  private reading: Promise<bigint> | undefined
  /** Resolves in the check phase of the current turn of the event loop (see current). */
  private readonly turn = oncePerTurn(() => undefined)
  private closed = false

  constructor(
    /** A new, unconnected client for the listener, with LISTENER_QUERY_TIMEOUT_MS as its query_timeout. */
    private readonly newClient: () => pg.Client,
    /** Reads data_version through the pool; throws StoreUnavailableError when the database is down. */
    private readonly readThroughPool: () => Promise<bigint>,
  ) {}

  async current(): Promise<bigint> {
    // Before a version is served from memory, whatever the listener's connection has already
    // delivered to this process is handled: a notification, or the connection's end — the database
    // stopping. Without this turn, a request read in the same turn of the event loop as that end
    // would still be answered from memory as if the database were there.
    if (this.listening && this.known !== undefined) await this.turn()
    const now = performance.now()
    if (!this.listening) this.listen(now)
    if (this.listening && this.known !== undefined && now < this.freshUntil) {
      if (now >= this.freshUntil - RENEW_AFTER_MS) this.refresh().catch(() => {}) // the next call reads again if this failed
      return this.known
    }
    return this.refresh()
  }

  /** A version this instance committed, or read: versions only grow, so the larger one wins. */
  observe(version: bigint): void {
    if (this.known === undefined || version > this.known) this.known = version
  }

  async close(): Promise<void> {
    this.closed = true
    const listener = this.listener
    this.drop()
    // A silent peer (a stalled proxy) never answers the end: not waited for past the listener's timeout.
    if (listener !== undefined) await Promise.race([listener.end().catch(() => {}), sleep(LISTENER_QUERY_TIMEOUT_MS)])
  }

  /** The backend pid of the listener while it listens, else undefined: for tests and operators. */
  get listenerPid(): number | undefined {
    return this.listening ? (this.listener as { processID?: number } | undefined)?.processID : undefined
  }

  /** One read at a time; callers arriving meanwhile share it. */
  private refresh(): Promise<bigint> {
    this.reading ??= (async () => {
      const started = performance.now()
      const epoch = this.epoch
      const listener = this.listening ? this.listener : undefined
      try {
        this.observe(listener === undefined ? await this.readThroughPool() : await this.readOn(listener))
        // Fresh only if the listener was listening during the whole read: then every change after
        // the read's snapshot is notified.
        if (listener !== undefined && this.listening && epoch === this.epoch) {
          this.freshUntil = Math.max(this.freshUntil, started + MAX_STALENESS_MS)
        }
        return this.known!
      } finally {
        this.reading = undefined
      }
    })()
    return this.reading
  }

  /** A read on the listener's connection; if that fails, the listener is given up and the pool reads. */
  private async readOn(listener: pg.Client): Promise<bigint> {
    try {
      const { rows } = await listener.query<{ version: string }>(READ_VERSION)
      return BigInt(rows[0]!.version)
    } catch {
      this.lost(listener)
      return this.readThroughPool()
    }
  }

  private listen(now: number): void {
    if (this.closed || this.listener !== undefined || now - this.lastAttempt < RECONNECT_INTERVAL_MS) return
    this.lastAttempt = now
    const client = this.newClient()
    this.listener = client
    // Never left without an 'error' listener: an unhandled one would end the process.
    client.on('error', () => this.lost(client))
    client.on('end', () => this.lost(client))
    // A backend being terminated by an immediate shutdown or a crash of another backend says so in
    // a notice (57P01, 57P02) before its connection closes: the listener is given up at once.
    client.on('notice', (notice) => {
      if (isUnavailable(notice)) this.lost(client)
    })
    client.on('notification', (message) => {
      if (message.channel === VERSION_CHANNEL && message.payload !== undefined && VERSION_TEXT.test(message.payload)) {
        this.observe(BigInt(message.payload))
      }
    })
    const establish = async (): Promise<void> => {
      await client.connect()
      // LISTEN commits before the read's snapshot is taken: every later change is either in the
      // read or notified (both, at worst). Two statements, not one: a multi-statement query would
      // be one transaction, and LISTEN takes effect only at its end.
      await client.query(`LISTEN ${VERSION_CHANNEL}`)
      const started = performance.now()
      const { rows } = await client.query<{ version: string }>(READ_VERSION)
      if (this.listener !== client) return
      this.observe(BigInt(rows[0]!.version))
      this.listening = true
      this.epoch++
      this.freshUntil = started + MAX_STALENESS_MS
    }
    establish().catch(() => this.lost(client))
  }

  private lost(client: pg.Client): void {
    if (this.listener !== client) return
    this.drop()
    client.end().catch(() => {})
  }

  private drop(): void {
    this.listener = undefined
    this.listening = false
    this.epoch++
    this.freshUntil = 0
  }
}
