/**
 * What the per-transaction peers (per-transaction-cancel-server.ts, per-transaction-place-server.ts)
 * share: the project's own server and store with one write of its orders swapped for a commit per
 * request, and the writer connection such a commit runs on.
 */
import { buildApp } from '../../src/app.js'
import type { Config } from '../../src/config.js'
import { serverLogger } from '../../src/server.js'
import type { OrderEventsRepository } from '../../src/store/order-events.js'
import { connect, type Db } from '../../src/store/sqlite/database.js'
import type { ApiKeysRepository, OrdersRepository, PetsRepository, Store } from '../../src/store/store.js'
import type { WebhooksRepository } from '../../src/store/webhooks.js'
import { onShutdown, tell } from '../lib/child-side.js'

/** BASELINE_SYNCHRONOUS: FULL (the default, durable as the project) or OFF (durability switched off). */
export function baselineSynchronous(): 'FULL' | 'OFF' {
  const setting = process.env.BASELINE_SYNCHRONOUS ?? 'FULL'
  if (setting !== 'FULL' && setting !== 'OFF') throw new Error(`BASELINE_SYNCHRONOUS must be FULL or OFF, got ${setting}`)
  return setting
}

/** A SQLite writer connection of its own, opened as the store opens each of its own, at `synchronous`. */
export function openWriter(path: string, busyTimeoutMs: number, synchronous: 'FULL' | 'OFF'): Db {
  const db = connect(path, false, busyTimeoutMs)
  db.pragma(`synchronous = ${synchronous}`)
  return db
}

/** The project's store, with its orders' cancel or place replaced; `closeSwapped` closes what replaces it. */
export class SwappedStore implements Store {
  readonly kind: Store['kind']
  readonly location: string
  readonly orders: OrdersRepository
  readonly apiKeys: ApiKeysRepository
  readonly pets: PetsRepository
  readonly events: OrderEventsRepository
  readonly webhooks: WebhooksRepository

  constructor(
    private readonly store: Store,
    swapped: Partial<Pick<OrdersRepository, 'cancel' | 'place'>>,
    private readonly closeSwapped: () => void | Promise<void>,
  ) {
    this.kind = store.kind
    this.location = store.location
    this.events = store.events
    this.webhooks = store.webhooks
    const orders = store.orders
    this.orders = {
      hasAny: () => orders.hasAny(),
      streamJson: () => orders.streamJson(),
      dataVersion: () => orders.dataVersion(),
      cancel: swapped.cancel ?? ((id, cancelledByKey, reason, expected) => orders.cancel(id, cancelledByKey, reason, expected)),
      place: swapped.place ?? ((request) => orders.place(request)),
      ship: (id, expected) => orders.ship(id, expected),
      complete: (id, expected) => orders.complete(id, expected),
      update: (request) => orders.update(request),
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
  backupTo(path: string): Promise<void> {
    return this.store.backupTo(path)
  }
  cursorSecret(): Promise<Buffer> {
    return this.store.cursorSecret()
  }
  async close(): Promise<void> {
    await this.closeSwapped()
    await this.store.close()
  }
}

/** Serves `store` as startServer() would (same logger level, same app options) and tells the bench its URL. */
export async function serve(config: Config, store: Store): Promise<void> {
  const app = await buildApp({ config, store, logger: serverLogger(config.logLevel), processMetrics: true })
  const url = await app.listen({ host: config.host, port: config.port })
  onShutdown(async () => {
    await app.close()
    await store.close()
  })
  tell({ type: 'ready', url })
}
