import { KEY_IN_USE, keyAnswer, type StoredKey } from './idempotency.js'
import { INT64_MAX } from './int64.js'
import { checkNewOrder, type IdempotencyClaim, type PlaceRequest, type PlaceResult } from './orders.js'

/**
 * What both stores decide about a place around their SQL: which places join a batch, and the ids
 * the new orders take. The stores keep the statements, the transactions and the locks.
 */

/** Reads the committed record of an Idempotency-Key (the store's read, outside any write). */
export type FindStoredKey = (apiKeyId: bigint, key: string) => Promise<StoredKey | undefined>

/**
 * The places a store of this process has taken and not yet settled. An order the store would
 * refuse is a RangeError at once (checkNewOrder: a statement it failed would fail its whole batch).
 * An Idempotency-Key is held by one place at a time, so a batch never holds one key twice. A place
 * whose key is held, by a place queued or in flight here or (the store answers key_in_use) by
 * another process's, is answered from the key's committed record when it has a live one: concurrent
 * retries of a place that has committed all get its first response (or key_reused), not only the
 * one that took the key. Without such a record, the place holding the key is still in flight:
 * `key_in_use`. Between processes the database decides who holds a key: SQLite's write lock,
 * PostgreSQL's advisory lock.
 */
export class PlaceAdmission {
  /** `apiKeyId key` of the keys held (a key has no space: visible ASCII). */
  private readonly held = new Set<string>()

  constructor(private readonly findKey: FindStoredKey) {}

  /**
   * `request` handed to `place` (which queues it for a batch, and settles once that has committed),
   * or refused. Its key is held until then, and released before the caller resumes: a retry right
   * after the answer finds the key free.
   */
  admit<Request extends PlaceRequest>(request: Request, place: (request: Request) => Promise<PlaceResult>): Promise<PlaceResult> {
    const refused = checkNewOrder(request.order)
    if (refused !== undefined) return Promise.reject(new RangeError(refused))
    const claim = request.idempotency
    if (claim === undefined) return place(request)
    const slot = `${claim.apiKeyId} ${claim.key}`
    if (this.held.has(slot)) return this.heldAnswer(claim)
    this.held.add(slot)
    return place(request)
      .finally(() => this.held.delete(slot))
      .then((result) => (result.outcome === 'key_in_use' ? this.heldAnswer(claim) : result))
  }

  /** The answer to a place whose key another holds: its live record's (keyAnswer), else key_in_use. */
  private async heldAnswer(claim: IdempotencyClaim): Promise<PlaceResult> {
    return keyAnswer(await this.findKey(claim.apiKeyId, claim.key), claim.fingerprint, new Date().toISOString()) ?? KEY_IN_USE
  }
}

/**
 * The ids places give: each above every id the store holds (imported ones included), from
 * `after + 1` (an empty store, or one of negative ids only, gives 1 first) up to `last`. Once the
 * store holds `last`, no id is left: the place is `ids_exhausted`.
 */
export const PLACED_IDS = { after: 0n, last: INT64_MAX } as const

/** The id of the `n`th of the orders placed together (1: the first) in a store whose largest id is `max` (null: none); undefined: none is left. */
export function placedId(max: bigint | null, n = 1n): bigint | undefined {
  const top = max === null || max < PLACED_IDS.after ? PLACED_IDS.after : max
  return n <= PLACED_IDS.last - top ? top + n : undefined
}
