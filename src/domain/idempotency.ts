import { hash } from 'node:crypto'
import type { OrderMetadata } from './order-metadata.js'
import type { NewOrder, PlaceResult } from './orders.js'

/** The status a placed order's Idempotency-Key record keeps: the first response's, 201 Created. */
export const PLACED_STATUS = 201

export const KEY_IN_USE = { outcome: 'key_in_use' } as const
const KEY_REUSED = { outcome: 'key_reused' } as const

/** An Idempotency-Key record as a store keeps it. */
export interface StoredKey {
  fingerprint: string
  orderId: bigint
  responseStatus: number | bigint
  responseBody: string
  /** As toISOString() writes it. */
  expiresAt: string
}

/**
 * A key's record answers the places with its key until it expires: at `now` (toISOString()'s form),
 * while its expiresAt is after the instant this gives. After that it is as good as absent: the next
 * place with the key goes on, and replaces it. keyAnswer judges by it, and so do a store that must
 * pick the records that still answer in SQL and the pruners, which delete the others.
 */
export const keyLiveAfter = (now: string): string => now

/**
 * What the stored record of a place's key answers it with at `now` (toISOString()'s form): nothing
 * when there is none or it has expired (keyLiveAfter: the place goes on, and replaces the record);
 * the first response again for the same body (`replayed`); `key_reused` for another.
 */
export function keyAnswer(stored: StoredKey | undefined, fingerprint: string, now: string): PlaceResult | undefined {
  if (stored === undefined || stored.expiresAt <= keyLiveAfter(now)) return undefined
  if (stored.fingerprint !== fingerprint) return KEY_REUSED
  return { outcome: 'replayed', orderId: stored.orderId, status: Number(stored.responseStatus), body: stored.responseBody }
}

/**
 * What identifies a placeOrder body for its Idempotency-Key: SHA-256 (hex) of its canonical JSON,
 * made from the validated order, not from the bytes sent. Keys in order, no whitespace, `petId` as
 * its exact decimal, `shipDate` as stored (UTC, milliseconds), absent when not given, `metadata` with its keys sorted. So the same
 * order however spelled (keys reordered, spaces, `+01:00` or `Z`, `5` or `5e0` refused alike) is
 * the same body, and any difference in what would be placed is another. (`hash()` is Node's one-shot
 * digest: a keyed place computes one, and it costs half of a createHash() chain.)
 */
export function placeFingerprint(order: NewOrder): string {
  const shipDate = order.shipDate === null ? '' : `,"shipDate":${JSON.stringify(order.shipDate)}`
  const canonical = `{"petId":${order.petId.toString()},"quantity":${order.quantity}${shipDate}${canonicalMetadata(order.metadata ?? null)}}`
  return hash('sha256', canonical, 'hex')
}

/** Metadata with its keys sorted (the same keys and values in another order are the same order); none: nothing. */
function canonicalMetadata(metadata: OrderMetadata | null): string {
  if (metadata === null) return ''
  const keys = Object.keys(metadata).sort()
  return `,"metadata":{${keys.map((key) => `${JSON.stringify(key)}:${JSON.stringify(metadata[key])}`).join(',')}}`
}
