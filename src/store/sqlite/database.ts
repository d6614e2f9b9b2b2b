import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, linkSync, mkdirSync, openSync, rmSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { Worker } from 'node:worker_threads'
import Database from 'better-sqlite3'
import { oncePerTurn } from '../../once-per-turn.js'
import { pendingMigrations, StoreUnavailableError } from '../store.js'
import { SQLITE_MIGRATIONS } from './migrations.js'
import { fromThreadError, type ThreadError } from './thread-error.js'

export type Db = Database.Database

// SQLite result codes that mean "the database cannot serve this now", not "this request is wrong".
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|READONLY|IOERR|FULL|CANTOPEN|CORRUPT|NOTADB|PROTOCOL)/

/**
 * Opens a connection the way every connection of this store must be opened. A read-only one, or one
 * with `mustExist`, never creates the file.
 */
export function connect(path: string, readonly: boolean, busyTimeoutMs: number, mustExist = readonly): Db {
  const db = new Database(path, { readonly, fileMustExist: readonly || mustExist })
  db.pragma(`busy_timeout = ${busyTimeoutMs}`)
  if (!readonly) {
    db.pragma('journal_mode = WAL')
    // The metadata index's triggers insert from json_each(), a virtual table, which SQLite stages
    // in a temporary table per statement: on a temporary file by default, a file created and
    // removed on every write with metadata (+20 µs of CPU a place, most of it system time). A
    // writer's temporary tables are small; its reads are the writes' own.
    db.pragma('temp_store = MEMORY')
  }
  // FULL, set on every connection: in WAL mode it syncs the WAL on every commit, so an acknowledged
  // cancel survives power loss, not only a crash of this process.
  db.pragma('synchronous = FULL')
  db.pragma('foreign_keys = ON')
  db.defaultSafeIntegers(true) // every INTEGER comes back as a bigint: ids never touch a number
  return db
}

/** The tables whose rows only a user's work puts there: migrations fill none of them. */
const USER_DATA = ['orders', 'pets', 'api_keys', 'webhook_endpoints'] as const

/**
 * Removes the SQLite database at `path` (with its WAL, shared-memory and journal files) that a
 * command created and then failed in, unless another process has come to use it meanwhile: one that
 * has it open (leaving WAL mode is refused while another connection has the file open), or whose
 * work it holds (an order, a pet, a key, a webhook endpoint). Two commands started together on a
 * new path each believe they create it; the one that fails must not take the other's with it.
 * Whether it was removed.
 */
export function removeUnusedDatabase(path: string): boolean {
  let db: Db
  try {
    db = new Database(path, { fileMustExist: true })
  } catch {
    return false
  }
  try {
    db.pragma('busy_timeout = 0')
    if (db.pragma('journal_mode = DELETE', { simple: true }) !== 'delete') return false
    db.exec('BEGIN EXCLUSIVE') // from here no other connection can read or write it until it is gone
    const tables = new Set(db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").pluck().all() as string[])
    if (USER_DATA.some((table) => tables.has(table) && db.prepare(`SELECT EXISTS (SELECT 1 FROM ${table})`).pluck().get() !== 0)) return false
    for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) rmSync(file, { force: true })
    return true
  } catch {
    return false // busy, or not a database of ours: kept
  } finally {
    db.close()
  }
}

/** backup-thread.ts's copy of `source` into `target`; rejected with its error, or the abort's. */
function copyOnThread(source: string, target: string, signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted()
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./backup-thread.js', import.meta.url), { workerData: { source, target } })
    worker.unref()
    const aborted = (): void => reject(signal!.reason as Error)
    signal?.addEventListener('abort', aborted, { once: true })
    worker.once('message', (reply: { done: true } | { error: ThreadError }) => {
      signal?.removeEventListener('abort', aborted)
      if ('done' in reply) resolve()
      else reject(fromThreadError(reply.error))
    })
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`the backup's thread ended (${code}) before the copy did`)))
  })
}

/** What each kind of unavailability means, for the one line an operator reads (the CLI's, the log's). */
const REASONS: Record<string, string> = {
  BUSY: 'another connection holds its write lock (an import, a backup, another process)',
  LOCKED: 'a table of it is locked',
  READONLY: 'it cannot be written',
  IOERR: 'reading or writing its file failed',
  FULL: 'the disk is full',
  CANTOPEN: 'its file cannot be opened',
  CORRUPT: 'its file is corrupt',
  NOTADB: 'its file is not a SQLite database',
  PROTOCOL: 'its locking protocol failed',
}

/** The kinds another process's work causes, which pass once it is done. */
const PASSING = new Set(['BUSY', 'LOCKED'])

/** Rethrows a driver error as StoreUnavailableError when it means the database is unavailable. */
export function classify(error: unknown): never {
  const code = (error as { code?: unknown }).code
  const kind = typeof code === 'string' ? UNAVAILABLE.exec(code)?.[1] : undefined
  if (kind !== undefined) {
    throw new StoreUnavailableError(`SQLite is unavailable: ${REASONS[kind]} (${code as string})`, { cause: error, passing: PASSING.has(kind) })
  }
  // better-sqlite3's own check, before SQLite is asked (a TypeError, named so when it comes from the
  // writer's thread): the database's folder was removed.
  if ((error as { message?: unknown }).message === FOLDER_GONE) throw new StoreUnavailableError(`SQLite is unavailable (${FOLDER_GONE})`, { cause: error, passing: false })
  throw error
}

const FOLDER_GONE = 'Cannot open database because the directory does not exist'

/** `work`'s result; its driver errors go through classify. */
export function classified<T>(work: () => T): T {
  try {
    return work()
  } catch (error) {
    classify(error)
  }
}

// Prepared once per connection and statement text (a few dozen texts at most: see orderPageStatement
// in ../order-page-sql.ts). A text is always run in one mode (pluck, raw or neither), which its first
// caller sets.
const prepared = new WeakMap<Db, Map<string, Database.Statement>>()

/** The statement `sql` on `db`, prepared on first use. */
export function statement(db: Db, sql: string): Database.Statement {
  let statements = prepared.get(db)
  if (statements === undefined) prepared.set(db, (statements = new Map()))
  let found = statements.get(sql)
  if (found === undefined) statements.set(sql, (found = db.prepare(sql)))
  return found
}

/**
 * The directory (0700) and the database file (0600) are private: orders and key hashes are nobody
 * else's business. SQLite gives its -wal and -shm files the database file's mode.
 */
function createPrivately(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  closeSync(openSync(path, 'a', 0o600)) // an existing file keeps its mode
}

/** A store opened with `mustExist` whose file does not exist. */
export class SqliteFileMissingError extends Error {
  readonly path: string
  constructor(path: string, options?: { cause?: unknown }) {
    super(`no SQLite database at ${path}`, options)
    this.name = 'SqliteFileMissingError'
    this.path = path
  }
}

export interface SqliteStoreOptions {
  /**
   * How long one statement waits for another process's write lock, blocking the event loop
   * meanwhile. The CLI can wait (default 5 s); the server waits briefly and retries cancels
   * asynchronously instead (see WriteBatcher).
   */
  busyTimeoutMs?: number
  /**
   * How long a queued write is retried while another process holds the write lock, before it fails
   * as unavailable (default 2 s, see WriteBatcher): an option so that a test can make the lock's
   * release, not this timer, end the wait.
   */
  busyRetryMs?: number
  /**
   * Open only a file that exists: when it does not, fail with an error naming it, having created
   * neither the file nor its directory. Otherwise both are made (privately) when missing.
   */
  mustExist?: boolean
}

/** The SQLite file: its writer connection, a few read connections, transactions and the data version. */
export class SqliteDatabase {
  readonly path: string
  readonly busyTimeoutMs: number
  readonly busyRetryMs: number | undefined
  readonly db: Db
  private readonly idleReaders: Db[] = []
  private closed = false

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.path = path
    this.busyTimeoutMs = options.busyTimeoutMs ?? 5000
    this.busyRetryMs = options.busyRetryMs
    const mustExist = options.mustExist === true
    try {
      if (!mustExist) createPrivately(path)
      this.db = connect(path, false, this.busyTimeoutMs, mustExist)
    } catch (error) {
      if (mustExist && !existsSync(path)) throw new SqliteFileMissingError(resolve(path), { cause: error })
      classify(error)
    }
  }

  async migrate(): Promise<number[]> {
    const db = this.db
    db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
    // IMMEDIATE takes the write lock first, so two processes starting together migrate one at a time.
    const apply = db.transaction(() => {
      const { v } = db.prepare('SELECT coalesce(max(version), 0) AS v FROM schema_migrations').get() as { v: bigint }
      const pending = pendingMigrations(SQLITE_MIGRATIONS, Number(v))
      for (const migration of pending) {
        db.exec(migration.sql)
        db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
          migration.version,
          migration.name,
          new Date().toISOString(),
        )
      }
      return pending.map((migration) => migration.version)
    })
    return classified(() => apply.immediate())
  }

  /**
   * The data version, read once a turn of the event loop, in its check phase. So a list is answered
   * from the database as it stands after the request was read (this process's commits, made in the
   * check phase too, and other processes' alike), for one read per turn however many requests it
   * brings. It also answers the turn's small lists together, after their requests are all read, as
   * PostgreSQL's version does (version-watcher.ts): a server that answered each at once, between the
   * reads, took ~1.6× the CPU per small list here.
   */
  readonly dataVersion: () => Promise<bigint> = oncePerTurn(() => this.readVersion())

  readVersion(): bigint {
    return classified(() => statement(this.db, 'SELECT version FROM data_version WHERE id = 1').pluck().get() as bigint)
  }

  /** A better-sqlite3 transaction function run as BEGIN IMMEDIATE. */
  immediate<T>(work: () => T): T {
    return classified(() => this.db.transaction(work).immediate())
  }

  /** BEGIN IMMEDIATE … COMMIT around async work (imports read their input while writing). */
  async inTransaction<T>(work: () => Promise<T>): Promise<T> {
    classified(() => this.db.exec('BEGIN IMMEDIATE'))
    try {
      const result = await work()
      this.db.exec('COMMIT')
      return result
    } catch (error) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK')
      throw error
    }
  }

  /**
   * `VACUUM INTO` a new file: one read snapshot, taken while other connections (a serving process)
   * keep writing, compacted. Written beside `path` into an empty file made first with mode 0600 (the
   * orders are nobody else's business), then linked to `path`, which fails if `path` exists: a
   * backup never replaces a file, and nothing half-written is ever found under its name.
   */
  /**
   * A consistent copy as a new file at `path`: `VACUUM INTO` a file made 0600 beside it, on a thread
   * of its own (backup-thread.ts), then linked to `path`, which must not exist (checked first, and
   * by the link). The partial file and its journal are removed whatever happens, and at once when
   * `signal` aborts (the copy goes on into the removed file until the process ends; its thread does
   * not hold the process).
   */
  async backupTo(path: string, signal?: AbortSignal): Promise<void> {
    if (existsSync(path)) throw Object.assign(new Error(`EEXIST: file already exists, '${path}'`), { code: 'EEXIST', path })
    const partial = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.partial`)
    const remove = (): void => {
      for (const file of [partial, `${partial}-journal`]) rmSync(file, { force: true })
    }
    // An abandoned copy's thread may still (re)create its file until the process ends: removed then too.
    process.once('exit', remove)
    try {
      closeSync(openSync(partial, 'wx', 0o600))
      await copyOnThread(this.path, partial, signal)
      linkSync(partial, path)
    } finally {
      remove()
      if (signal?.aborted !== true) process.off('exit', remove)
    }
  }

  acquireReader(): Db {
    return classified(() => this.idleReaders.pop() ?? connect(this.path, true, this.busyTimeoutMs))
  }

  releaseReader(reader: Db): void {
    let reusable = !this.closed && this.idleReaders.length < 4
    try {
      if (reader.inTransaction) reader.exec('COMMIT') // a read snapshot: nothing to write
    } catch {
      reusable = false // still in its transaction, it would fail the next list's BEGIN
    }
    if (reusable) this.idleReaders.push(reader)
    else reader.close()
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    for (const reader of this.idleReaders.splice(0)) reader.close()
    this.db.close()
  }
}
