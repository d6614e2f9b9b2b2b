import { KEY_IN_USE, KeysInFlight } from '../../domain/idempotency.js'
import type { PlaceRequest, PlaceResult } from '../../domain/orders.js'
import { GroupCommit } from '../group-commit.js'
import type { Traced } from './write-sql.js'

/** More places than this wait for the next batch. */
const MAX_BATCH = 1000

/**
 * Group commit (../group-commit.ts) for places: a batch is one transaction (one data_version lock,
 * one WAL flush).
 *
 * An Idempotency-Key is held by at most one place of this instance at a time: a place whose key is
 * queued or in flight here is `key_in_use` at once, without joining a batch. So a batch never holds
 * one key twice; the database's advisory lock decides between instances (orders-repository.ts).
 */
export class PlaceBatcher {
  private readonly batches: GroupCommit<Traced<PlaceRequest>, PlaceResult>
  private readonly keysInFlight = new KeysInFlight()

  constructor(
    /** One transaction for the batch; resolves after COMMIT with a result per request, in order. */
    commitBatch: (requests: Traced<PlaceRequest>[]) => Promise<PlaceResult[]>,
  ) {
    this.batches = new GroupCommit({ maxBatch: MAX_BATCH, commit: commitBatch })
  }

  /** Queues `request` for the next batch (or answers key_in_use at once); settles once that batch has committed. */
  submit(request: Traced<PlaceRequest>): Promise<PlaceResult> {
    const claim = request.idempotency
    const slot = claim === undefined ? undefined : this.keysInFlight.claim(claim)
    if (claim !== undefined && slot === undefined) return Promise.resolve(KEY_IN_USE)
    const placed = this.batches.submit(request)
    // Released before the caller resumes: a retry right after the answer finds the key free.
    return slot === undefined ? placed : placed.finally(() => this.keysInFlight.release(slot))
  }

  /** Waits until every place already requested has settled. */
  drain(): Promise<void> {
    return this.batches.drain()
  }
}
