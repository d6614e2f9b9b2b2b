/**
 * The serialized order list of the current data version, per content encoding, bounded in bytes.
 *
 * A data version is bumped in the same transaction as every change to orders, so a body cached for
 * version v is exactly the list while the database is still at v, on any instance: nothing here can
 * go stale. An entry for an older version is dropped as soon as a newer one is stored.
 */
export class ListCache {
  private readonly entries = new Map<string, { version: bigint; body: Buffer }>()
  private bytes = 0

  constructor(readonly maxBytes: number) {}

  get(version: bigint, encoding: string): Buffer | undefined {
    const entry = this.entries.get(encoding)
    return entry !== undefined && entry.version === version ? entry.body : undefined
  }

  /** Collects the chunks of one response; `finish()` stores them if they fit and are still current. */
  collector(version: bigint, encoding: string): { add(chunk: Buffer): void; finish(): void } | undefined {
    if (this.maxBytes === 0) return undefined
    let chunks: Buffer[] | undefined = []
    let size = 0
    return {
      add: (chunk) => {
        if (chunks === undefined) return
        size += chunk.length
        if (size > this.maxBytes) chunks = undefined // too big to cache: give up, keep streaming
        else chunks.push(chunk)
      },
      finish: () => {
        if (chunks === undefined) return
        this.store(version, encoding, Buffer.concat(chunks, size))
        chunks = undefined
      },
    }
  }

  private store(version: bigint, encoding: string, body: Buffer): void {
    for (const [key, entry] of this.entries) {
      if (entry.version < version || key === encoding) this.drop(key)
      else if (entry.version > version) return // a newer list is already here
    }
    while (this.bytes + body.length > this.maxBytes && this.entries.size > 0) this.drop(this.entries.keys().next().value!)
    this.entries.set(encoding, { version, body })
    this.bytes += body.length
  }

  private drop(key: string): void {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.bytes -= entry.body.length
    this.entries.delete(key)
  }
}
