import type { PlaceRequest, PlaceResult } from '../../domain/orders.js'
import { TurnBatches } from './turn-batches.js'

interface PendingPlace {
  request: PlaceRequest
  resolve: (result: PlaceResult) => void
  reject: (error: unknown) => void
}

/** More places than this wait for the next batch. */
const MAX_BATCH = 1000

const KEY_IN_USE: PlaceResult = { outcome: 'key_in_use' }

/**
 * Group commit for places, as RowWriteBatcher is for cancels (both scheduled by TurnBatches): the
 * places that arrive in one turn of the event loop share one transaction (one data_version lock,
 * one WAL flush); one batch is committed at a time, and those that arrive meanwhile form the next.
 * Each place settles only after its batch's COMMIT, with its own result; if the batch fails,
 * nothing in it committed and every place in it is rejected with that error.
 *
 * An Idempotency-Key is held by at most one place of this instance at a time: a place whose key is
 * queued or in flight here is `key_in_use` at once, without joining a batch. So a batch never holds
 * one key twice; the database's advisory lock decides between instances (orders-repository.ts).
 */
export class PlaceBatcher {
  private readonly batches = new TurnBatches<PendingPlace>(MAX_BATCH, (batch) => this.run(batch))
  /** `apiKeyId key` of every claim queued or in flight here (a key has no space: visible ASCII). */
  private readonly claimedKeys = new Set<string>()

  constructor(
    /** One transaction for the batch; resolves after COMMIT with a result per request, in order. */
    private readonly commitBatch: (requests: PlaceRequest[]) => Promise<PlaceResult[]>,
  ) {}

  place(request: PlaceRequest): Promise<PlaceResult> {
    const claim = request.idempotency
    const slot = claim === undefined ? undefined : `${claim.apiKeyId} ${claim.key}`
    if (slot !== undefined) {
      if (this.claimedKeys.has(slot)) return Promise.resolve(KEY_IN_USE)
      this.claimedKeys.add(slot)
    }
    const placed = new Promise<PlaceResult>((resolve, reject) => this.batches.push({ request, resolve, reject }))
    // Released before the caller resumes: a retry right after the answer finds the key free.
    return slot === undefined ? placed : placed.finally(() => this.claimedKeys.delete(slot))
  }

  /** Waits until every place already requested has settled. */
  drain(): Promise<void> {
    return this.batches.drain()
  }

  private async run(batch: PendingPlace[]): Promise<void> {
    let results: PlaceResult[]
    try {
      results = await this.commitBatch(batch.map((pending) => pending.request))
    } catch (error) {
      for (const pending of batch) pending.reject(error)
      return
    }
    batch.forEach((pending, i) => pending.resolve(results[i]!))
  }
}
