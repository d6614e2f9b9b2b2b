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
import { loadConfig } from '../../src/config.js'
import { SERVER_SQLITE_OPTIONS } from '../../src/server.js'
import type { PlaceRequest, PlaceResult } from '../../src/domain/orders.js'
import { openStore } from '../../src/store/open-store.js'
import { PostgresDatabase } from '../../src/store/postgres/database.js'
import { mustRetryPlaces, placeInTransaction } from '../../src/store/postgres/places.js'
import { BUMP_DATA_VERSION } from '../../src/store/sqlite/migrations.js'
import { OrderWrites } from '../../src/store/sqlite/order-writes.js'
import { failed } from '../lib/child-side.js'
import { baselineSynchronous, openWriter, serve, SwappedStore } from './swapped-store.js'

type PlaceOne = (request: PlaceRequest) => Promise<PlaceResult>

/** SQLite: one transaction per place (the project's place statements, the version) on a writer connection of its own. */
function sqlitePlaces(path: string, busyTimeoutMs: number, synchronous: 'FULL' | 'OFF'): { place: PlaceOne; close(): void } {
  const db = openWriter(path, busyTimeoutMs, synchronous)
  // The statements of the project's WriteBatcher for a batch of one place.
  const writes = new OrderWrites(db)
  const bump = db.prepare(BUMP_DATA_VERSION)
  const commitOne = db.transaction((request: PlaceRequest): PlaceResult => {
    let changed = false
    const result = writes.place({ now: new Date().toISOString(), changed: () => void (changed = true) }, undefined, request) // untraced
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
          const { results } = await database.transaction((connection) => placeInTransaction(connection, [request], [undefined], new Date()))
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

try {
  const config = loadConfig()
  const inner = await openStore(config.database, SERVER_SQLITE_OPTIONS)
  await inner.migrate()
  const places =
    config.database.kind === 'sqlite'
      ? sqlitePlaces(config.database.path, SERVER_SQLITE_OPTIONS.busyTimeoutMs, baselineSynchronous())
      : postgresPlaces(config.database.url, config.database.poolSize)
  const place = async (request: PlaceRequest): Promise<PlaceResult> => {
    if (request.idempotency !== undefined) throw new Error('the per-transaction place peer is measured without Idempotency-Key')
    return places.place(request)
  }
  await serve(config, new SwappedStore(inner, { place }, () => places.close()))
} catch (error) {
  failed(error)
}
