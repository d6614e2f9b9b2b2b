/**
 * Baseline of the places comparison: the project's own server (same app, routes, authentication,
 * validation, logging, metrics, same store for everything else) except that each place is committed
 * in its own transaction — no group commit. Child process of bench/run.ts.
 *
 * SQLite: as the cancel peer (per-transaction-cancel-server.ts), a writer connection of its own
 * opened as the store opens its own (WAL, synchronous=FULL, busy_timeout, foreign_keys, safe
 * integers), and for each place the transaction the project's place runs for a batch of one: BEGIN
 * IMMEDIATE, the project's own place statements (OrderWrites: the next id, max(id) + 1 under the
 * write lock, the INSERT, its `order.created` event), the data-version bump, COMMIT. With
 * BASELINE_SYNCHRONOUS=OFF it commits without syncing: durability switched off.
 *
 * PostgreSQL: each place in a transaction of its own (BEGIN, the project's place statements for one
 * request, COMMIT), up to DATABASE_POOL_SIZE at once on a pool of its own: they queue for the writers'
 * lock (data_version's row) that each holds to COMMIT, with no group to share a WAL flush with.
 * With `options=-c synchronous_commit=off` in DATABASE_URL, durability is switched off.
 *
 * It is measured without Idempotency-Key (the keyed places are compared with the project's own
 * unkeyed ones): a place with one is refused.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import pino from 'pino'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { logDestination, SERVER_SQLITE_OPTIONS } from '../../src/server.js'
import type { PlaceRequest, PlaceResult } from '../../src/domain/orders.js'
import { openStore } from '../../src/store/open-store.js'
import { PostgresDatabase } from '../../src/store/postgres/database.js'
import { mustRetryPlaces, placeInTransaction } from '../../src/store/postgres/place-orders.js'
import { BUMP_DATA_VERSION } from '../../src/store/sqlite/migrations.js'
import { OrderWrites } from '../../src/store/sqlite/order-writes.js'
import type { ApiKeysRepository, OrdersRepository, PetsRepository, Store } from '../../src/store/store.js'
import type { OrderEventsRepository } from '../../src/store/order-events.js'
import type { WebhooksRepository } from '../../src/store/webhooks.js'
import { failed, onShutdown, tell } from '../lib/child-side.js'

type PlaceOne = (request: PlaceRequest) => Promise<PlaceResult>

/** SQLite: one transaction per place (the project's place statements, the version) on a writer connection of its own. */
function sqlitePlaces(path: string, busyTimeoutMs: number, synchronous: 'FULL' | 'OFF'): { place: PlaceOne; close(): void } {
  const db = new Database(path)
  db.pragma(`busy_timeout = ${busyTimeoutMs}`)
  db.pragma('journal_mode = WAL')
  db.pragma(`synchronous = ${synchronous}`)
  db.pragma('foreign_keys = ON')
  db.defaultSafeIntegers(true)
  // The statements of the project's WriteBatcher for a batch of one place.
  const writes = new OrderWrites(db)
  const bump = db.prepare(BUMP_DATA_VERSION)
  const commitOne = db.transaction((request: PlaceRequest): PlaceResult => {
    let changed = false
    const result = writes.place({ now: new Date().toISOString(), changed: () => void (changed = true) }, request)
    if (changed) bump.run()
    return result
  })
  return {
    place: async (request) => commitOne.immediate(request),
    close: () => db.close(),
  }
}

/**
 * PostgreSQL: each place in a transaction of its own, on a pool of its own as large as the store's,
 * as many at once as the pool allows, with the project's statements (placeInTransaction for one
 * request) and its retry when an import took an id meanwhile.
 */
function postgresPlaces(url: string, poolSize: number): { place: PlaceOne; close(): Promise<void> } {
  const database = new PostgresDatabase(url, { poolSize })
  return {
    async place(request) {
      for (let attempt = 1; ; attempt++) {
        try {
          const { results } = await database.transaction((lease) => placeInTransaction(lease, [request], new Date()))
          return results[0]!
        } catch (error) {
          if (!mustRetryPlaces(error) || attempt >= 100) throw error
          await sleep(10)
        }
      }
    },
    close: () => database.close(),
  }
}

/** The project's store, with its orders' place replaced. */
class PerTransactionPlaceStore implements Store {
  readonly kind: Store['kind']
  readonly orders: OrdersRepository
  readonly apiKeys: ApiKeysRepository
  readonly pets: PetsRepository
  readonly events: OrderEventsRepository
  readonly webhooks: WebhooksRepository

  constructor(
    private readonly store: Store,
    place: PlaceOne,
    private readonly closePlaces: () => void | Promise<void>,
  ) {
    this.kind = store.kind
    this.events = store.events
    this.webhooks = store.webhooks
    const orders = store.orders
    this.orders = {
      hasAny: () => orders.hasAny(),
      streamJson: () => orders.streamJson(),
      dataVersion: () => orders.dataVersion(),
      cancel: (id, cancelledByKey, reason) => orders.cancel(id, cancelledByKey, reason),
      place: async (request) => {
        if (request.idempotency !== undefined) throw new Error('the per-transaction place peer is measured without Idempotency-Key')
        return place(request)
      },
      ship: (id) => orders.ship(id),
      complete: (id) => orders.complete(id),
      pruneIdempotencyKeys: (now, limit) => orders.pruneIdempotencyKeys(now, limit),
      import: (records, onProgress) => orders.import(records, onProgress),
      pageJson: (query) => orders.pageJson(query),
      find: (id) => orders.find(id),
    }
    this.apiKeys = store.apiKeys
    this.pets = store.pets
  }

  migrate(): Promise<number[]> {
    return this.store.migrate()
  }
  ping(): Promise<void> {
    return this.store.ping()
  }
  cursorSecret(): Promise<Buffer> {
    return this.store.cursorSecret()
  }
  async close(): Promise<void> {
    await this.closePlaces()
    await this.store.close()
  }
}

try {
  // As startServer() does, with the store swapped: same logger level, same app options.
  const config = loadConfig()
  const inner = await openStore(config.database, SERVER_SQLITE_OPTIONS)
  await inner.migrate()
  let store: PerTransactionPlaceStore
  if (config.database.kind === 'sqlite') {
    const places = sqlitePlaces(config.database.path, SERVER_SQLITE_OPTIONS.busyTimeoutMs, synchronousSetting())
    store = new PerTransactionPlaceStore(inner, places.place, places.close)
  } else {
    const places = postgresPlaces(config.database.url, config.database.poolSize)
    store = new PerTransactionPlaceStore(inner, places.place, places.close)
  }
  const logger = pino(
    { level: config.logLevel, redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' } },
    logDestination(),
  )
  const app = await buildApp({ config, store, logger, processMetrics: true })
  const url = await app.listen({ host: config.host, port: config.port })
  onShutdown(async () => {
    await app.close()
    await store.close()
  })
  tell({ type: 'ready', url })
} catch (error) {
  failed(error)
}

function synchronousSetting(): 'FULL' | 'OFF' {
  const setting = process.env.BASELINE_SYNCHRONOUS ?? 'FULL'
  if (setting !== 'FULL' && setting !== 'OFF') throw new Error(`BASELINE_SYNCHRONOUS must be FULL or OFF, got ${setting}`)
  return setting
}
