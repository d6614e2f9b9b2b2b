/**
 * The serialized order list of the current data version, per content encoding, bounded in bytes.
 *
 * A data version is bumped in the same transaction as every change to orders, so a body cached for
 * version v is exactly the list while the database is still at v, on any instance: nothing here can
 * go stale. Entries of an older version are dropped as soon as a newer version is being collected.
 * Bodies are kept as the chunks they were sent in (no second, concatenated copy).
 */
export interface CachedList {
  chunks: Buffer[]
  bytes: number
}

export class ListCache {
  private readonly entries = new Map<string, { version: bigint } & CachedList>()
  private bytes = 0

  constructor(readonly maxBytes: number) {}

  get(version: bigint, encoding: string): CachedList | undefined {
    const entry = this.entries.get(encoding)
    return entry !== undefined && entry.version === version ? entry : undefined
  }

  /** Collects the chunks of one response; `finish()` stores them if they fit and are still current. */
  collector(version: bigint, encoding: string): { add(chunk: Buffer): void; finish(): void } | undefined {
    if (this.maxBytes === 0) return undefined
    for (const [key, entry] of this.entries) if (entry.version < version) this.drop(key)
    let chunks: Buffer[] | undefined = []
    let size = 0
    return {
      add: (chunk) => {
        if (chunks === undefined) return
        size += chunk.length
        if (size > this.maxBytes) chunks = undefined // too big to cache: let it go, keep streaming
        else chunks.push(chunk)
      },
      finish: () => {
        // A small list is kept as one buffer: one write per request instead of a stream of chunks.
        if (chunks !== undefined && chunks.length > 1 && size <= 1024 * 1024) chunks = [Buffer.concat(chunks, size)]
        if (chunks !== undefined) this.store(version, encoding, { chunks, bytes: size })
        chunks = undefined
      },
    }
  }

  private store(version: bigint, encoding: string, body: CachedList): void {
    for (const [key, entry] of this.entries) {
      if (entry.version > version) return // a newer list is already here
      if (entry.version < version || key === encoding) this.drop(key)
    }
    while (this.bytes + body.bytes > this.maxBytes && this.entries.size > 0) this.drop(this.entries.keys().next().value!)
    this.entries.set(encoding, { version, ...body })
    this.bytes += body.bytes
  }

  private drop(key: string): void {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.bytes -= entry.bytes
    this.entries.delete(key)
  }
}
