import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import type { FastifyBaseLogger } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig, type Config, type DatabaseConfig } from '../../src/config.js'
import { generateApiKey, SCOPES, type Scope } from '../../src/domain/api-keys.js'
import type { OrderRecord, OrderStatus } from '../../src/domain/orders.js'
import type { ApiApp } from '../../src/http/api-app.js'
import type { Order } from '../../src/schemas/order.js'
import { openServerStore } from '../../src/server.js'
import type { SqliteStoreOptions } from '../../src/store/sqlite/sqlite-store.js'
import { openStore } from '../../src/store/open-store.js'
import type { Store } from '../../src/store/store.js'
import { createTestDatabase, postgresSkipReason } from './postgres.js'
import { spawnServer, stopServer, type ServerProcess } from './server-process.js'

export type StoreKind = 'sqlite' | 'postgres'

/** A fresh, migrated database of one kind; `dispose()` closes nothing but removes what it made. */
export interface TestDatabaseHandle {
  kind: StoreKind
  config: DatabaseConfig
  /** The DATABASE_URL of this database, for spawned processes. */
  url: string
  dispose(): Promise<void>
}

export async function createDatabase(kind: StoreKind): Promise<TestDatabaseHandle> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-test-'))
    const path = join(dir, 'petstore.db')
    return {
      kind,
      config: { kind: 'sqlite', path },
      url: `sqlite:${path}`,
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    }
  }
  const database = await createTestDatabase()
  return {
    kind,
    config: { kind: 'postgres', url: database.url, poolSize: 10 },
    url: database.url,
    dispose: () => database.drop(),
  }
}

/**
 * A PostgreSQL database of its own for the suite being declared, made before its tests and dropped
 * after; `skip` says why there is none (PostgreSQL does not answer, and REQUIRE_POSTGRES is unset).
 */
export function postgresForSuite(): { readonly skip: string | undefined; readonly database: TestDatabaseHandle } {
  let skip: string | undefined
  let database: TestDatabaseHandle | undefined
  before(async () => {
    skip = await postgresSkipReason()
    if (skip === undefined) database = await createDatabase('postgres')
  })
  after(async () => database?.dispose())
  return {
    get skip() {
      return skip
    },
    get database() {
      return database!
    },
  }
}

/**
 * Runs the same suite once per store: SQLite always, PostgreSQL when it answers (or always, with
 * REQUIRE_POSTGRES=1). Skipping prints its reason.
 */
export function forEachStore(title: string, suite: (kind: StoreKind) => void): void {
  for (const kind of ['sqlite', 'postgres'] as const) {
    describe(`${title} [${kind}]`, async () => {
      if (kind === 'postgres') {
        const reason = await postgresSkipReason()
        if (reason !== undefined) {
          describe('PostgreSQL', { skip: reason }, () => {})
          return
        }
      }
      suite(kind)
    })
  }
}

/** A suite's store: its fields are set once the suite's `before` has run. */
export interface SuiteStore {
  database: TestDatabaseHandle
  store: Store
}

/** A fresh migrated database of `kind` and a store on it, for the suite this is called in; closed and removed after it. */
export function storeForSuite(kind: StoreKind): SuiteStore {
  const suite = {} as SuiteStore
  before(async () => {
    suite.database = await createDatabase(kind)
    suite.store = await openStore(suite.database.config)
    await suite.store.migrate()
  })
  after(async () => {
    await suite.store?.close()
    await suite.database?.dispose()
  })
  return suite
}

export interface TestServer {
  app: ApiApp
  store: Store
  /** `http://127.0.0.1:PORT` — a real listening socket. */
  origin: string
  database: TestDatabaseHandle
  /** Creates a key in the store and returns its secret. */
  createKey(options?: { scopes?: Scope[]; expiresAt?: Date | null; name?: string }): Promise<string>
  importOrders(orders: Partial<OrderRecord>[]): Promise<void>
  close(): Promise<void>
}

// Servers are closed when the test file ends (a root-level hook), whoever started them.
const openServers = new Set<TestServer>()
after(async () => {
  await Promise.all([...openServers].map((server) => server.close()))
})

export interface TestServerOptions {
  env?: Record<string, string>
  database?: TestDatabaseHandle
  /** A pino logger for the app (none by default). */
  logger?: FastifyBaseLogger
  /** How the SQLite store is opened (default: as the server opens it). */
  sqlite?: SqliteStoreOptions
}

/** A real server on 127.0.0.1 with a real, migrated database of `kind`, closed when the file ends. */
export async function startTestServer(kind: StoreKind, options: TestServerOptions = {}): Promise<TestServer> {
  const database = options.database ?? (await createDatabase(kind))
  const config: Config = { ...loadConfig({ PORT: '0', ...options.env }), database: database.config }
  const store = await openServerStore(config, options.sqlite)
  await store.migrate()
  const app = await buildApp({ config, store, logger: options.logger })
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  let closed = false
  const server: TestServer = {
    app,
    store,
    origin: address,
    database,
    async createKey({ scopes = [...SCOPES], expiresAt = null, name = 'test' } = {}) {
      const key = generateApiKey()
      await store.apiKeys.create({ name, hash: key.hash, displayPrefix: key.displayPrefix, scopes, expiresAt })
      return key.secret
    },
    async importOrders(orders) {
      await store.orders.import(records(orders.map(order)))
    },
    async close() {
      if (closed) return
      closed = true
      await app.close()
      await store.close()
      if (options.database === undefined) await database.dispose()
    },
  }
  openServers.add(server)
  return server
}

/** Two `serve` processes on one database; set once the suite's `before` has run. */
export interface ServersOnOneDatabase {
  database: TestDatabaseHandle
  /** The test's own connection to the database. */
  store: Store
  /** A key with every scope. */
  key: string
  /** A test may replace either (a restart): the suite stops whichever runs at its end. */
  a: ServerProcess
  b: ServerProcess
  /** One more `serve` process on the database, with the same environment; stopped at the suite's end if still running. */
  spawn(): Promise<ServerProcess>
}

/**
 * Sets up, for the suite it is called in, a fresh, migrated database of `kind` (`seed` runs on it
 * first) and two `serve` processes on it (SQLite: two processes on one file; PostgreSQL: two
 * instances), with `env`; stops them and removes the database after the suite.
 */
export function serversOnOneDatabase(
  kind: StoreKind,
  options: { env?: Record<string, string>; seed?: (store: Store) => Promise<unknown> } = {},
): ServersOnOneDatabase {
  const spawned: ServerProcess[] = []
  const servers = {
    async spawn() {
      const server = await spawnServer(servers.database.url, options.env)
      spawned.push(server)
      return server
    },
  } as ServersOnOneDatabase
  before(async () => {
    servers.database = await createDatabase(kind)
    servers.store = await openStore(servers.database.config)
    await servers.store.migrate()
    await options.seed?.(servers.store)
    const key = generateApiKey()
    await servers.store.apiKeys.create({ name: 'servers', hash: key.hash, displayPrefix: key.displayPrefix, scopes: [...SCOPES], expiresAt: null })
    servers.key = key.secret
    ;[servers.a, servers.b] = await Promise.all([servers.spawn(), servers.spawn()])
  })
  after(async () => {
    await Promise.all(spawned.map(stopServer))
    await servers.store?.close()
    await servers.database?.dispose()
  })
  return servers
}

export function order(fields: Partial<OrderRecord>): OrderRecord {
  return {
    id: 1n,
    petId: null,
    quantity: null,
    shipDate: null,
    complete: false,
    status: 'pending' as OrderStatus,
    ...fields,
  }
}

export async function* records<T>(items: T[]): AsyncIterable<T> {
  yield* items
}

export function bearer(secret: string): Record<string, string> {
  return { authorization: `Bearer ${secret}` }
}

/** The Order v1 lists for `record` (a record the list shows): an unknown value omitted, never null. */
export function listedOrder(record: OrderRecord): Order {
  const listed: Order = { id: record.id }
  if (record.petId !== null) listed.petId = record.petId
  if (record.quantity !== null) listed.quantity = record.quantity
  if (record.shipDate !== null) listed.shipDate = record.shipDate
  listed.complete = record.complete
  return listed
}

/**
 * Every listed order, as the store's JSON pages say, ids and petIds as bigint (exact): the integers
 * are read from the text, never through a number.
 */
export async function listedOrders(store: Store): Promise<Order[]> {
  const pages: string[] = []
  for await (const page of store.orders.streamJson()) pages.push(page.toString())
  const text = `[${pages.join(',')}]`.replace(/"(id|petId)":(-?[0-9]+)/g, '"$1":"$2"')
  return (JSON.parse(text) as Record<string, unknown>[]).map((o) => {
    const parsed = { ...o, id: BigInt(o.id as string) } as Order
    if (o.petId !== undefined) parsed.petId = BigInt(o.petId as string)
    return parsed
  })
}

/** The ids of a JSON array of orders, read from the text: exact, whatever their size. */
export function idsInBody(text: string): string[] {
  return [...text.matchAll(/"id":(-?[0-9]+)/g)].map((match) => match[1]!)
}

/** Asserts an Error response: the status, the Error body with exactly its three fields, the code. */
export async function expectError(response: Response, status: number, code: string): Promise<Record<string, unknown>> {
  const text = await response.text()
  assert.equal(response.status, status, `expected ${status} ${code}, got ${response.status}: ${text}`)
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
  const body = JSON.parse(text) as Record<string, unknown>
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status'])
  assert.equal(body.code, code)
  assert.equal(body.status, status)
  assert.equal(typeof body.message, 'string')
  assert.ok((body.message as string).length > 0)
  return body
}

/** Polls `check` every `everyMs` until it holds; returns how long that took, or fails after `ms`. */
export async function within(ms: number, what: string, check: () => Promise<boolean> | boolean, everyMs = 5): Promise<number> {
  const started = performance.now()
  while (!(await check())) {
    if (performance.now() - started > ms) assert.fail(`${what}: not within ${ms} ms`)
    await sleep(everyMs)
  }
  return performance.now() - started
}

/**
 * Polls `check` every `everyMs` until it holds, however long that takes: for what the code does by
 * itself at no time of its own (a loaded machine only makes it later). A check that never holds is
 * ended by the runner's timeout (--test-timeout), not by a deadline here.
 */
export async function eventually(check: () => Promise<boolean> | boolean, everyMs = 5): Promise<void> {
  while (!(await check())) await sleep(everyMs)
}

/** SQLite: a checkpoint can reset the WAL only when no reader holds an old snapshot. */
export function sqliteReaderReleased(server: TestServer): () => Promise<boolean> {
  return async () => {
    const db = new Database((server.database.config as { path: string }).path, { timeout: 0 }) // answer, don't wait
    try {
      const [result] = db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[]
      return result!.busy === 0
    } finally {
      db.close()
    }
  }
}
