import { randomUUID } from 'node:crypto'
import { open, unlink, type FileHandle } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { MaybePromise } from '../maybe-async.js'

/** Bodies up to this size are kept in memory as one buffer; larger ones in a file. */
export const IN_MEMORY_MAX_BYTES = 1024 * 1024

/** A cached list, ready to send: a buffer, or the finished fill whose file holds it, joined (the caller releases it). */
export type CachedBody = { bytes: number; buffer: Buffer } | { bytes: number; fill: ListFill }

type Entry = { version: bigint; bytes: number } & ({ buffer: Buffer } | { fill: ListFill })

/**
 * A list body being written from the database at the database's pace, whatever its readers do.
 * Responses follow it as it grows (`read`), each at its own pace, from its file (from memory when no
 * file can be made). The file has no name: it was unlinked as soon as it was open, so the system
 * frees it when it is closed, or when the process ends however it ends. A reader (and the cache, for
 * a fill it keeps) must `release()` it when done; the file is closed when the fill and all its
 * readers are.
 */
export class ListFill {
  written = 0
  done = false
  failure: unknown = undefined
  /** The body in memory: all of it when there is no file, else only while it is small enough to cache so. */
  private held: Buffer[] | undefined = []
  private users = 1 // the fill itself
  private waiting: (() => void)[] = []

  constructor(
    readonly version: bigint,
    readonly file: FileHandle | undefined,
  ) {}

  /** Appends the bytes of `parts`; resolves once they are written (the fill's backpressure). */
  async append(parts: Buffer[]): Promise<void> {
    let bytes = 0
    for (const part of parts) bytes += part.length
    if (this.file !== undefined) await this.file.writev(parts, this.written)
    if (this.held !== undefined) {
      this.held.push(...parts)
      if (this.file !== undefined && this.written + bytes > IN_MEMORY_MAX_BYTES) this.held = undefined
    }
    this.written += bytes
    this.wake()
  }

  end(failure?: unknown): void {
    this.done = true
    this.failure = failure
    this.wake()
  }

  /** The whole body as one buffer, if it is held in memory. */
  buffer(): Buffer | undefined {
    return this.held === undefined ? undefined : Buffer.concat(this.held, this.written)
  }

  /** Resolves once the first bytes are written or the fill has ended; rejects if it failed before writing any. */
  async started(): Promise<void> {
    while (this.written === 0 && !this.done) await this.changed()
    if (this.written === 0 && this.failure !== undefined) throw this.failure
  }

  /**
   * Copies bytes from `position` into `buffer`, waiting for them if the fill has not written them
   * yet. 0 at the end of the body; rejects if the fill failed before it.
   */
  async read(buffer: Buffer, position: number): Promise<number> {
    while (position >= this.written && !this.done) await this.changed()
    if (position >= this.written) {
      if (this.failure !== undefined) throw this.failure
      return 0
    }
    const length = Math.min(buffer.length, this.written - position)
    if (this.file !== undefined) return (await this.file.read(buffer, 0, length, position)).bytesRead
    let offset = 0
    let copied = 0
    for (const chunk of this.held!) {
      if (copied === length) break
      const end = offset + chunk.length
      if (end > position + copied) copied += chunk.copy(buffer, copied, position + copied - offset, Math.min(chunk.length, position + length - offset))
      offset = end
    }
    return copied
  }

  join(): this {
    this.users++
    return this
  }

  /** Whether a response still reads it (besides the fill itself). */
  get followed(): boolean {
    return this.users > 1
  }

  release(): void {
    if (--this.users === 0 && this.file !== undefined) void this.file.close().catch(() => {})
  }

  private changed(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve))
  }

  private wake(): void {
    for (const resolve of this.waiting.splice(0)) resolve()
  }
}

/** The bytes of a list body, produced by the database (see ListCache.follow). */
export type ListSource = () => AsyncIterable<Buffer[]>

/**
 * The serialized order list of the current data version, per content encoding, bounded in bytes,
 * and the fills that write it.
 *
 * A data version is bumped in the same transaction as every change to orders, so a body cached for
 * version v is exactly the list while the database is still at v, on any instance: nothing here can
 * go stale. Entries of an older version are dropped as soon as a newer one is stored.
 *
 * A miss does not stream from the database to its client: it starts (or joins) the one fill of its
 * version and encoding, which reads the database as fast as the database and the disk go, and
 * follows it. A slow client therefore holds a file descriptor and its send buffers, never a database
 * connection or snapshot; at most `maxFills` fills read the database at once (the others wait their
 * turn). Small lists are cached in memory; a large one (1,000,000 orders are ~90 MB) stays in its
 * fill's file under TMPDIR, unlinked as soon as it was created and read from the open descriptor:
 * the page cache keeps it warm without counting against the process, and nothing is left on disk
 * after the process, even after a SIGKILL. A dropped entry's file may still be read by a response in
 * flight; it is closed when that response ends.
 */
export class ListCache {
  private readonly entries = new Map<string, Entry>()
  private readonly fills = new Map<string, ListFill>()
  private bytes = 0
  private closed = false
  private running = 0
  private readonly queue: (() => void)[] = []

  constructor(
    readonly maxBytes: number,
    readonly maxFills: number,
  ) {}

  get(version: bigint, encoding: string): MaybePromise<CachedBody | undefined> {
    const entry = this.entries.get(encoding)
    if (entry === undefined || entry.version !== version) return undefined
    if ('buffer' in entry) return { bytes: entry.bytes, buffer: entry.buffer }
    return { bytes: entry.bytes, fill: entry.fill.join() }
  }

  /**
   * The fill of this version and encoding, joined (the caller releases it): the one running, or a
   * new one reading `source`. A complete body that fits is cached when the fill ends.
   */
  async follow(version: bigint, encoding: string, source: ListSource): Promise<ListFill> {
    const running = this.fills.get(encoding)
    if (running !== undefined && running.version === version) return running.join()
    const file = await this.newFile()
    const again = this.fills.get(encoding) // another miss may have started it meanwhile
    if (again !== undefined && again.version === version) {
      void file?.close().catch(() => {})
      return again.join()
    }
    const fill = new ListFill(version, file)
    this.fills.set(encoding, fill)
    void this.fill(fill, encoding, source)
    return fill.join()
  }

  /** Drops every entry, closing its file once no response reads it (the app is closing); running fills stop. */
  async close(): Promise<void> {
    this.closed = true
    for (const key of [...this.entries.keys()]) this.drop(key)
  }

  private async fill(fill: ListFill, encoding: string, source: ListSource): Promise<void> {
    await this.turn()
    try {
      for await (const parts of source()) {
        if (this.closed) throw new Error('the server is closing')
        // A newer version's fill took its place and no response reads it: it would only hold a
        // database stream (and a turn) that the newer list needs.
        if (this.fills.get(encoding) !== fill && !fill.followed) throw new Error('superseded by a newer version')
        await fill.append(parts)
      }
      fill.end()
      this.store(encoding, fill)
    } catch (error) {
      fill.end(error)
    } finally {
      this.running--
      this.queue.shift()?.()
      if (this.fills.get(encoding) === fill) this.fills.delete(encoding)
      fill.release()
    }
  }

  /** Waits until fewer than `maxFills` fills read the database. */
  private async turn(): Promise<void> {
    while (this.running >= this.maxFills) await new Promise<void>((resolve) => this.queue.push(resolve))
    this.running++
  }

  /**
   * A new file, already unlinked, or undefined if none can be made (full or read-only disk). Created
   * exclusively (never through a planted link), readable by this user only, under an unguessable
   * name that exists only until the unlink a moment later.
   */
  private async newFile(): Promise<FileHandle | undefined> {
    if (this.closed) return undefined
    const path = join(tmpdir(), `petstore-orders-list-${randomUUID()}.body`)
    let file: FileHandle | undefined
    try {
      file = await open(path, 'wx+', 0o600)
      await unlink(path)
      return file
    } catch {
      await file?.close().catch(() => {})
      return undefined
    }
  }

  private store(encoding: string, fill: ListFill): void {
    if (this.closed || fill.written > this.maxBytes) return
    const buffer = fill.written <= IN_MEMORY_MAX_BYTES ? fill.buffer() : undefined
    if (buffer === undefined && fill.file === undefined) return // no file could be made: not cached
    for (const [key, held] of this.entries) {
      if (held.version > fill.version) return // a newer list is already here
      if (held.version < fill.version || key === encoding) this.drop(key)
    }
    const entry: Entry = buffer !== undefined ? { version: fill.version, bytes: fill.written, buffer } : { version: fill.version, bytes: fill.written, fill: fill.join() }
    // Nothing over maxBytes is stored, so evicting the others always makes room.
    while (this.bytes + entry.bytes > this.maxBytes && this.entries.size > 0) this.drop(this.entries.keys().next().value!)
    this.entries.set(encoding, entry)
    this.bytes += entry.bytes
  }

  private drop(key: string): void {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.bytes -= entry.bytes
    this.entries.delete(key)
    if ('fill' in entry) entry.fill.release()
  }
}
