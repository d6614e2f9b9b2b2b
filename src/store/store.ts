import type { ApiKey, NewApiKey } from '../domain/api-keys.js'
import type { UpdateRequest, UpdateResult } from '../domain/order-patch.js'
import type {
  CancellationReason,
  CancelResult,
  CompleteResult,
  ExpectedVersion,
  OrderRecord,
  OrderV2Record,
  PlaceRequest,
  PlaceResult,
  ShipResult,
} from '../domain/orders.js'
import type { OrderPageQuery } from '../domain/order-pages.js'
import type { OrderEventsRepository } from './order-events.js'
import type { WebhooksRepository } from './webhooks.js'
import type { Pet } from '../schemas/pet.js'

/** A run of Order JSON objects, as UTF-8 bytes (see OrdersRepository.streamJson). */
export type JsonPage = Buffer

/** A v2 page as JSON text (see OrdersRepository.pageJson). */
export interface OrderPageJson {
  /** The page's orders as a JSON array, UTF-8. */
  json: Buffer
  /** The id of the page's last order; undefined for an empty page. */
  lastId: bigint | undefined
  /** Whether at least one more matching order follows this page. */
  more: boolean
}

/** Called every 10,000 records of an import with the count so far. */
export type ImportProgress = (count: number) => void

/**
 * The orders aggregate. Ids are `bigint` on this side of the interface, always. The event of a
 * place, cancel, ship or complete keeps the trace context active when the method is called
 * (activeTraceContext, taken as the write is queued: its group commit runs outside the caller's
 * context), for its webhook deliveries; an import's events keep none.
 */
export interface OrdersRepository {
  /** Whether any order is listed (one that is not cancelled). */
  hasAny(): Promise<boolean>
  /**
   * Every order that is not cancelled, ascending id, from one consistent snapshot: each item is a
   * non-empty, comma-joined run of Order JSON objects, byte for byte what the Order schema's
   * serializer writes (fields in the order id, petId, quantity, shipDate, complete; unknown values
   * omitted; ids as exact integer literals). The database builds the text, so the hot path allocates
   * no objects per row; tests hold it equal to the schema's serializer. Pages are bytes as the
   * database hands them over, never decoded into strings. Breaking out releases the cursor.
   */
  streamJson(): AsyncIterable<JsonPage>
  /**
   * Bumped in the same transaction as every change to orders; equal versions mean equal lists.
   * May be served from memory, stale by at most the store's documented bound, never across this
   * instance's own changes. May wait for the check phase of the event loop's turn (both stores do
   * while the version is in hand), so that the small lists of a turn are answered together.
   */
  dataVersion(): Promise<bigint>
  /**
   * pending → cancelled by one conditional update, recording when, by which key and (optionally) why;
   * durable before it resolves. Group-committed with the cancels of the same moment. Of any number
   * of concurrent cancels of one order exactly one is `cancelled`; the others, and any later one,
   * are `already_cancelled` with the order as that first cancel left it (its time and reason).
   * Every change to an order (these writes, update, an import that changes it) moves its version on
   * by one, in the same statement; a write given `expected` (If-Match) to an order at another
   * version is `precondition_failed` and changes nothing.
   */
  cancel(id: bigint, cancelledByKey: bigint | null, reason?: CancellationReason | null, expected?: ExpectedVersion): Promise<CancelResult>
  /**
   * placeOrder: a new pending order with an id above every id the store holds (imported ones
   * included), never reused, with its `order.created` event and its Idempotency-Key record (if it
   * has one) in the same transaction; durable before it resolves. Group-committed with the places
   * of the same moment. Of any number of concurrent places with one key (on any number of
   * instances) exactly one is `placed`; the others are `key_in_use` while it is in flight, and
   * `replayed` (or `key_reused`) once it has committed. A key record past its `expiresAt` is ignored
   * (and replaced).
   */
  place(request: PlaceRequest): Promise<PlaceResult>
  /**
   * pending → shipped, `shippedAt` set, by one conditional update with its `order.shipped` event in
   * the same transaction; durable before it resolves. Shipped already: `already_shipped`, unchanged.
   */
  ship(id: bigint, expected?: ExpectedVersion): Promise<ShipResult>
  /**
   * shipped and not complete → complete, `completedAt` set, by one conditional update with its
   * `order.completed` event; durable before it resolves. Complete already: `already_complete`.
   */
  complete(id: bigint, expected?: ExpectedVersion): Promise<CompleteResult>
  /**
   * updateOrder: the patch applied to the order as the writing transaction reads it, by the rule of
   * domain/order-patch.ts; when it changes anything, the order and its `order.updated` event (with
   * `previous`) in one transaction, durable before it resolves, group-committed with the updates of
   * the same moment. Concurrent updates of one order are applied one after the other: none is lost.
   * A patch value a statement would refuse (checkNewOrder) rejects with a RangeError, writing nothing.
   */
  update(request: UpdateRequest): Promise<UpdateResult>
  /** Deletes at most `limit` Idempotency-Key records that expired before `now`; returns how many. */
  pruneIdempotencyKeys(now: Date, limit: number): Promise<number>
  /**
   * One transaction: all records are upserted by id, or none (the iterable's error is rethrown). An
   * order already cancelled keeps its first cancellation's time and reason, whatever the record says.
   */
  import(records: AsyncIterable<OrderRecord>, onProgress?: ImportProgress): Promise<number>
  /**
   * v2: at most `limit` orders matching the filters after `after`, ascending id, each from an index,
   * as the JSON array the OrderV2 schema's serializer writes for them (fields in its order: id,
   * complete, status, petId, quantity, shipDate, cancelledAt, cancellationReason), built by the database; the last order's id; and whether another matching
   * order follows (the database reads `limit + 1`). test/v2-page-json.test.ts holds the bytes.
   */
  pageJson(query: OrderPageQuery): Promise<OrderPageJson>
  /** v2: the order, whatever its status. */
  find(id: bigint): Promise<OrderV2Record | undefined>
}

/** What revoking a key found: the key as it is now, and whether it was revoked before. */
export interface RevokedKey {
  key: ApiKey
  alreadyRevoked: boolean
}

/** The API keys aggregate: only hashes are stored, never a key. */
export interface ApiKeysRepository {
  create(key: NewApiKey): Promise<ApiKey>
  findByHash(hash: string): Promise<ApiKey | undefined>
  /** Every key, ascending id. */
  list(): Promise<ApiKey[]>
  /** By id or display prefix. Undefined when no key matches; revoking twice keeps the first time. */
  revoke(idOrPrefix: string): Promise<RevokedKey | undefined>
}

/** The pets aggregate. */
export interface PetsRepository {
  find(id: bigint): Promise<Pet | undefined>
  /** One transaction: all pets are upserted by id, or none. */
  import(records: AsyncIterable<Pet>, onProgress?: ImportProgress): Promise<number>
}

/**
 * What the service needs from a database: the database's own operations, and one repository per
 * aggregate. SQLite (`sqlite/`) and PostgreSQL (`postgres/`) implement it and pass the same test
 * suite (test/store-contract.test.ts).
 */
export interface Store {
  readonly kind: 'sqlite' | 'postgres'
  /** Where the data is, as the start line names it: `sqlite /absolute/path.db` or `postgres HOST:PORT/DATABASE`, never a user or password. */
  readonly location: string
  /** Applies pending migrations; returns the versions it applied. Refuses a schema newer than the code. */
  migrate(): Promise<number[]>
  /** Throws when the database cannot answer. */
  ping(): Promise<void>
  /** The secret that signs v2 list cursors: made by a migration, shared by every instance. */
  cursorSecret(): Promise<Buffer>
  /**
   * A consistent copy of the database as a new file at `path` (mode 0600), made while others keep
   * writing; an existing `path` is refused, never overwritten. SQLite only: PostgreSQL's is pg_dump.
   * `signal` abandons it, leaving nothing.
   */
  backupTo(path: string, signal?: AbortSignal): Promise<void>
  close(): Promise<void>
  readonly orders: OrdersRepository
  readonly apiKeys: ApiKeysRepository
  readonly pets: PetsRepository
  /** The order event feed: the outbox every change to orders writes in its own transaction. */
  readonly events: OrderEventsRepository
  /** Webhook endpoints, their positions in the feed, leases and attempts. */
  readonly webhooks: WebhooksRepository
}

/** An import record that breaks a rule the database enforces (e.g. a cancelled order revived). */
export class ImportConflictError extends Error {
  /** The order refused, for the importer to name its record. */
  readonly orderId: bigint | undefined
  constructor(message: string, orderId?: bigint) {
    super(message)
    this.name = 'ImportConflictError'
    this.orderId = orderId
  }
}

/** The database cannot be reached or cannot write now; the API answers 503. */
export class StoreUnavailableError extends Error {
  /**
   * Whether it may pass by itself, so that waiting for the database makes sense: a server down or
   * unreachable, another process's write lock. Not a file that is no database or cannot be opened.
   */
  readonly passing: boolean
  constructor(message: string, options?: { cause?: unknown; passing?: boolean }) {
    super(message, options)
    this.name = 'StoreUnavailableError'
    this.passing = options?.passing ?? true
  }
}

/** One step of a store's schema; each store lists its own, in order, append only. */
export interface Migration {
  version: number
  name: string
  sql: string
  /** false: run on its own, outside a transaction (PostgreSQL's CREATE INDEX CONCURRENTLY). */
  transaction?: false
}

/** The migrations a schema at version `current` still needs, in order; throws if it is newer than this build. */
export function pendingMigrations(migrations: readonly Migration[], current: number): Migration[] {
  const latest = migrations.at(-1)?.version ?? 0
  if (current > latest) throw new Error(`the database schema is at version ${current}, newer than this build knows (${latest})`)
  return migrations.filter((migration) => migration.version > current)
}
