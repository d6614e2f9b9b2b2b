/**
 * What the imports of orders (order-import.ts) and pets (pets-repository.ts) share on PostgreSQL:
 * their records read and written in batches, one batch written while the next is read.
 */

/** Rows per multi-row INSERT of an import; 10,000 (the progress step) is a multiple of it. */
const IMPORT_BATCH = 5_000
const PROGRESS_STEP = 10_000

/**
 * Writes batches strictly one after another, without making the caller wait for the one in flight:
 * the caller reads (and parses) the next batch while the database writes this one.
 */
class Pipeline<R> {
  private inFlight: Promise<void> = Promise.resolve()

  constructor(private readonly writeBatch: (batch: R[]) => Promise<void>) {}

  /** Waits for the previous batch (its failure is thrown here), then starts writing this one. */
  async send(batch: R[], afterWritten?: () => void): Promise<void> {
    await this.inFlight
    const written = this.writeBatch(batch).then(afterWritten)
    written.catch(() => {}) // observed by the next send() or drain(), not unhandled meanwhile
    this.inFlight = written
  }

  /** Waits for the batch in flight; throws its failure. */
  drain(): Promise<void> {
    return this.inFlight
  }
}

/**
 * Reads an import's records one at a time and hands them to `writeBatch` in batches of at most
 * IMPORT_BATCH, so memory stays flat whatever the input's size; while one batch is being written
 * the next one is read. Returns how many records it read.
 * An error of the input itself is rethrown as it is — but only after the records read before it
 * are written, so that a record the database refuses is reported first, as a one-by-one import would.
 */
export async function consumeInBatches<R extends { id: bigint }>(
  records: AsyncIterable<R>,
  onProgress: ((count: number) => void) | undefined,
  writeBatch: (batch: R[]) => Promise<void>,
): Promise<number> {
  // Rows waiting to be written by one multi-row INSERT, by id, in input order. An id appears at most
  // once in a batch (ON CONFLICT cannot touch one row twice in a statement), so a repeated id first
  // flushes the batch: records then apply in input order, exactly as if upserted one by one.
  let batch = new Map<bigint, R>()
  const take = (): R[] => {
    const records = [...batch.values()]
    batch = new Map()
    return records
  }
  const writer = new Pipeline(writeBatch)
  let count = 0
  const iterator = records[Symbol.asyncIterator]()
  let exhausted = false
  try {
    for (;;) {
      let step: IteratorResult<R>
      try {
        step = await iterator.next()
      } catch (error) {
        exhausted = true
        if (batch.size > 0) await writer.send(take())
        await writer.drain()
        throw error
      }
      if (step.done === true) {
        exhausted = true
        break
      }
      const record = step.value
      if (batch.has(record.id)) await writer.send(take())
      batch.set(record.id, record)
      count++
      // Batches end on every multiple of IMPORT_BATCH, so progress is reported for records written.
      if (count % IMPORT_BATCH === 0) {
        const written = count
        await writer.send(take(), onProgress !== undefined && written % PROGRESS_STEP === 0 ? () => onProgress(written) : undefined)
      }
    }
    if (batch.size > 0) await writer.send(take())
    await writer.drain()
    return count
  } finally {
    // Nothing may still be running when the transaction ends.
    await writer.drain().catch(() => {})
    // Stopped early by a failed write: let the input release what it holds (a file, a socket).
    if (!exhausted) await iterator.return?.().catch(() => {})
  }
}
