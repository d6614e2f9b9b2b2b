/**
 * The schedule of a group commit: what is queued in one turn of the event loop forms a batch (at
 * most `maxBatch`, the rest waiting for the next); one batch runs at a time, and what arrives
 * meanwhile forms the next batch, run as soon as this one is done. `run` settles every item of its
 * batch itself and never rejects.
 */
export class TurnBatches<Item> {
  private queue: Item[] = []
  private scheduled = false
  private running: Promise<void> | undefined

  constructor(
    private readonly maxBatch: number,
    private readonly run: (batch: Item[]) => Promise<void>,
  ) {}

  push(item: Item): void {
    this.queue.push(item)
    this.schedule()
  }

  /** Waits until every batch of what is already queued has run. */
  async drain(): Promise<void> {
    while (this.scheduled || this.running !== undefined) {
      await (this.running ?? new Promise<void>((resolve) => setImmediate(resolve)))
    }
  }

  private schedule(): void {
    if (this.scheduled || this.running !== undefined) return
    this.scheduled = true
    // After the I/O of this turn: every item whose request arrived in it joins the batch.
    setImmediate(() => {
      this.scheduled = false
      this.flush()
    })
  }

  private flush(): void {
    const batch = this.queue.splice(0, this.maxBatch)
    if (batch.length === 0) return
    this.running = this.run(batch).finally(() => {
      this.running = undefined
      if (this.queue.length > 0) this.schedule()
    })
  }
}
