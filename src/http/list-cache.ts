import { createWriteStream, mkdtempSync, readdirSync, rmSync, type WriteStream } from 'node:fs'
import { open, rm, type FileHandle } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { MaybePromise } from '../maybe-async.js'

/** Bodies up to this size are kept in memory as one buffer; larger ones go to a file. */
export const IN_MEMORY_MAX_BYTES = 1024 * 1024
/** Past this much unwritten data the file is abandoned rather than let the cache hold memory. */
const MAX_PENDING_FILE_BYTES = 16 * 1024 * 1024

/** A cached list, ready to send: a buffer, or the file it was written to, open (see sendFile). */
export type CachedBody = { bytes: number; buffer: Buffer } | { bytes: number; file: FileHandle }

/** Collects one response's bytes while it streams; nothing is cached unless `finish()` is called. */
export interface ListCollector {
  add(chunk: Buffer): void
  /** The whole body went out: cache it if it is complete, fits, and is still current. */
  finish(): void
  /** The response stopped short (client gone, database failure): cache nothing. */
  abort(): void
}

type Entry = { version: bigint; bytes: number } & ({ buffer: Buffer } | { path: string })

/**
 * The serialized order list of the current data version, per content encoding, bounded in bytes.
 *
 * A data version is bumped in the same transaction as every change to orders, so a body cached for
 * version v is exactly the list while the database is still at v, on any instance: nothing here can
 * go stale. Entries of an older version are dropped as soon as a newer version is being collected.
 *
 * Small lists stay in memory. A large list (1,000,000 orders are ~90 MB) is written to a file in a
 * private temporary directory as it streams, and sent from that file: the operating system's page
 * cache keeps it in memory when it can, but it never counts against the process, whose memory stays
 * flat however long the list. A dropped file may still be open for a response in flight; the
 * system frees it when that response ends.
 */
export class ListCache {
  private readonly entries = new Map<string, Entry>()
  private bytes = 0
  private directory: string | undefined
  private files = 0
  private closed = false
  private readonly collecting = new Map<string, { version: bigint; abandon(): void }>()

  constructor(readonly maxBytes: number) {}

  /** The cached body of this version and encoding, or undefined (also when its file is gone). */
  get(version: bigint, encoding: string): MaybePromise<CachedBody | undefined> {
    const entry = this.entries.get(encoding)
    if (entry === undefined || entry.version !== version) return undefined
    if ('buffer' in entry) return { bytes: entry.bytes, buffer: entry.buffer }
    // Opened before anything is sent, so a file dropped meanwhile is a miss, not a cut body.
    return open(entry.path, 'r').then(
      (file): CachedBody => ({ bytes: entry.bytes, file }),
      () => undefined,
    )
  }

  /**
   * A collector for one response, or undefined when there is nothing to collect: the cache is off,
   * or another response is already collecting this version and encoding (concurrent misses write
   * one file, not one each). Collectors of older versions are abandoned.
   */
  collector(version: bigint, encoding: string): ListCollector | undefined {
    if (this.maxBytes === 0 || this.closed) return undefined
    for (const [key, entry] of this.entries) if (entry.version < version) this.drop(key)
    for (const [key, active] of this.collecting) {
      if (active.version < version) active.abandon()
      else if (key === encoding) return undefined
    }
    let chunks: Buffer[] | undefined = []
    let file: { path: string; stream: WriteStream } | undefined
    let size = 0
    let done = false
    const end = (): void => {
      done = true
      if (this.collecting.get(encoding) === active) this.collecting.delete(encoding)
    }
    const abandon = (): void => {
      end()
      chunks = undefined
      if (file !== undefined) discard(file)
      file = undefined
    }
    const active = { version, abandon }
    this.collecting.set(encoding, active)
    return {
      add: (chunk) => {
        if (done) return
        size += chunk.length
        if (size > this.maxBytes) return abandon() // too big to cache: let it go, keep streaming
        if (file !== undefined) {
          if (file.stream.writableLength > MAX_PENDING_FILE_BYTES) return abandon() // the disk is not keeping up
          file.stream.write(chunk)
          return
        }
        chunks!.push(chunk)
        if (size > IN_MEMORY_MAX_BYTES) {
          file = this.newFile()
          if (file === undefined) return abandon() // no temporary directory: the list is simply not cached
          for (const held of chunks!) file.stream.write(held)
          chunks = undefined
        }
      },
      finish: () => {
        if (done) return
        end()
        if (file === undefined) {
          this.store(encoding, { version, bytes: size, buffer: Buffer.concat(chunks!, size) })
          chunks = undefined
          return
        }
        const { path, stream } = file
        stream.end(() => {
          if (stream.errored === null) this.store(encoding, { version, bytes: size, path })
          else discard({ path, stream })
        })
      },
      abort: () => {
        if (!done) abandon()
      },
    }
  }

  /** Drops every entry and removes the files' directory (the app is closing). */
  close(): void {
    this.closed = true
    for (const active of [...this.collecting.values()]) active.abandon()
    for (const key of [...this.entries.keys()]) this.drop(key)
    if (this.directory !== undefined) rmSync(this.directory, { recursive: true, force: true })
    this.directory = undefined
  }

  /** A new file in this process's directory, or undefined if none can be made (full or read-only disk). */
  private newFile(): { path: string; stream: WriteStream } | undefined {
    if (this.closed) return undefined
    try {
      if (this.directory === undefined) {
        removeStaleDirectories()
        this.directory = mkdtempSync(join(tmpdir(), `${DIRECTORY_PREFIX}${process.pid}-`))
      }
    } catch {
      return undefined
    }
    const path = join(this.directory, `${++this.files}.body`)
    const stream = createWriteStream(path, { mode: 0o600 })
    stream.on('error', () => {}) // checked in finish(); a failed file is simply not cached
    return { path, stream }
  }

  private store(encoding: string, entry: Entry): void {
    const discardNew = (): void => {
      if ('path' in entry) void rm(entry.path, { force: true })
    }
    if (this.closed) return discardNew()
    for (const [key, held] of this.entries) {
      if (held.version > entry.version) return discardNew() // a newer list is already here
      if (held.version < entry.version || key === encoding) this.drop(key)
    }
    // The collector gives up on anything over maxBytes, so evicting the others always makes room.
    while (this.bytes + entry.bytes > this.maxBytes && this.entries.size > 0) this.drop(this.entries.keys().next().value!)
    this.entries.set(encoding, entry)
    this.bytes += entry.bytes
  }

  private drop(key: string): void {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.bytes -= entry.bytes
    this.entries.delete(key)
    if ('path' in entry) void rm(entry.path, { force: true })
  }
}

const DIRECTORY_PREFIX = 'petstore-orders-list-'

/**
 * Removes the directories of servers that are gone (killed before they could remove their own),
 * recognised by the process id in their name. A directory whose process is alive is left alone,
 * whoever that process is.
 */
function removeStaleDirectories(): void {
  const name = new RegExp(`^${DIRECTORY_PREFIX}(\\d+)-`)
  for (const entry of readdirSync(tmpdir())) {
    const pid = Number(name.exec(entry)?.[1] ?? NaN)
    if (!Number.isSafeInteger(pid) || pid === process.pid || isAlive(pid)) continue
    rmSync(join(tmpdir(), entry), { recursive: true, force: true })
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' // alive, another user's
  }
}

function discard(file: { path: string; stream: WriteStream }): void {
  file.stream.destroy()
  void rm(file.path, { force: true })
}
