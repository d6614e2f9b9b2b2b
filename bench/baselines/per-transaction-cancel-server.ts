/**
 * Baseline of comparison 5: the project's own server (same app, routes, authentication, logging,
 * metrics, same SQLite store for everything else) except that each cancel is committed in its own
 * transaction, as soon as it arrives — no group commit. The transaction is the one the project's
 * CancelBatcher runs for a batch, for one cancel: BEGIN IMMEDIATE, the conditional UPDATE, the
 * data-version bump, COMMIT. Its connection is opened exactly as the store opens its own (WAL,
 * synchronous=FULL, the server's busy_timeout, foreign_keys, safe integers): every COMMIT syncs the WAL before the
 * 204 is sent, so durability is identical. Child process of bench/run.ts; SQLite only.
 */
import type { OrderPageQuery, OrderV2Record } from '../../src/domain/order-pages.js'
import Database from 'better-sqlite3'
import pino from 'pino'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { BatchedDestination } from '../../src/log-destination.js'
import { SERVER_SQLITE_OPTIONS } from '../../src/server.js'
import type { ApiKey, NewApiKey } from '../../src/domain/api-keys.js'
import type { CancelOutcome, OrderRecord, OrderStatus, ShipOutcome } from '../../src/domain/orders.js'
import type { MaybePromise } from '../../src/maybe-async.js'
import type { Order } from '../../src/schemas/order.js'
import type { Pet } from '../../src/schemas/pet.js'
import { openStore } from '../../src/store/open-store.js'
import type { JsonPage, Store } from '../../src/store/store.js'
import { failed, onShutdown, tell } from '../lib/child-side.js'

/** One synchronous=FULL transaction per cancel on a writer connection of its own. */
class PerTransactionCancels {
  private readonly db: Database.Database
  private readonly commitOne: Database.Transaction<(id: bigint, cancelledByKey: bigint | null) => CancelOutcome>

  constructor(path: string, busyTimeoutMs: number) {
    const db = new Database(path)
    db.pragma(`busy_timeout = ${busyTimeoutMs}`)
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = FULL')
    db.pragma('foreign_keys = ON')
    db.defaultSafeIntegers(true)
    const cancel = db.prepare(
      `UPDATE orders SET status = 'cancelled', cancelled_at = ?, cancelled_by_key = ? WHERE id = ? AND status = 'pending'`,
    )
    const statusOf = db.prepare('SELECT status FROM orders WHERE id = ?')
    const bump = db.prepare('UPDATE data_version SET version = version + 1 WHERE id = 1')
    this.commitOne = db.transaction((id: bigint, cancelledByKey: bigint | null): CancelOutcome => {
      if (cancel.run(new Date().toISOString(), cancelledByKey, id).changes === 1) {
        bump.run()
        return 'cancelled'
      }
      const row = statusOf.get(id) as { status: OrderStatus } | undefined
      return row?.status === 'shipped' ? 'already_shipped' : 'not_found'
    })
    this.db = db
  }

  cancel(id: bigint, cancelledByKey: bigint | null): CancelOutcome {
    return this.commitOne.immediate(id, cancelledByKey)
  }

  close(): void {
    this.db.close()
  }
}

/** The project's store, with cancelOrder replaced by PerTransactionCancels. */
class PerTransactionCancelStore implements Store {
  readonly kind: Store['kind']

  constructor(
    private readonly store: Store,
    private readonly cancels: PerTransactionCancels,
  ) {
    this.kind = store.kind
  }

  async cancelOrder(id: bigint, cancelledByKey: bigint | null): Promise<CancelOutcome> {
    return this.cancels.cancel(id, cancelledByKey)
  }

  migrate(): Promise<number[]> {
    return this.store.migrate()
  }
  ping(): Promise<void> {
    return this.store.ping()
  }
  streamOrders(batchSize?: number): AsyncIterable<Order[]> {
    return this.store.streamOrders(batchSize)
  }
  streamOrdersJson(): AsyncIterable<JsonPage> {
    return this.store.streamOrdersJson()
  }
  dataVersion(): MaybePromise<bigint> {
    return this.store.dataVersion()
  }
  shipOrder(id: bigint): Promise<ShipOutcome> {
    return this.store.shipOrder(id)
  }
  importOrders(records: AsyncIterable<OrderRecord>, onProgress?: (count: number) => void): Promise<number> {
    return this.store.importOrders(records, onProgress)
  }
  importPets(records: AsyncIterable<Pet>, onProgress?: (count: number) => void): Promise<number> {
    return this.store.importPets(records, onProgress)
  }
  findPet(id: bigint): Promise<Pet | undefined> {
    return this.store.findPet(id)
  }
  orderPage(query: OrderPageQuery): Promise<OrderV2Record[]> {
    return this.store.orderPage(query)
  }
  findOrderV2(id: bigint): Promise<OrderV2Record | undefined> {
    return this.store.findOrderV2(id)
  }
  cursorSecret(): Promise<Buffer> {
    return this.store.cursorSecret()
  }
  createApiKey(key: NewApiKey): Promise<ApiKey> {
    return this.store.createApiKey(key)
  }
  findApiKeyByHash(hash: string): Promise<ApiKey | undefined> {
    return this.store.findApiKeyByHash(hash)
  }
  listApiKeys(): Promise<ApiKey[]> {
    return this.store.listApiKeys()
  }
  revokeApiKey(idOrPrefix: string): Promise<ApiKey | undefined> {
    return this.store.revokeApiKey(idOrPrefix)
  }
  async close(): Promise<void> {
    this.cancels.close()
    await this.store.close()
  }
}

try {
  // As startServer() does, with the store swapped: same logger level, same app options.
  const config = loadConfig()
  if (config.database.kind !== 'sqlite') throw new Error('the per-transaction cancel baseline is for SQLite')
  const inner = await openStore(config.database, SERVER_SQLITE_OPTIONS)
  await inner.migrate()
  const store = new PerTransactionCancelStore(inner, new PerTransactionCancels(config.database.path, SERVER_SQLITE_OPTIONS.busyTimeoutMs))
  const logger = pino(
    { level: config.logLevel, redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' } },
    new BatchedDestination(1),
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
