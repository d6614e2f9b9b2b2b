import { hash } from 'node:crypto'
import type { NewOrder } from '../domain/orders.js'

/**
 * What identifies a placeOrder body for its Idempotency-Key: SHA-256 (hex) of its canonical JSON,
 * made from the validated order, not from the bytes sent. Keys in order, no whitespace, `petId` as
 * its exact decimal, `shipDate` as stored (UTC, milliseconds), absent when not given. So the same
 * order however spelled (keys reordered, spaces, `+01:00` or `Z`, `5` or `5e0` refused alike) is
 * the same body, and any difference in what would be placed is another. (`hash()` is Node's one-shot
 * digest: a keyed place computes one, and it costs half of a createHash() chain.)
 */
export function placeFingerprint(order: NewOrder): string {
  const shipDate = order.shipDate === null ? '' : `,"shipDate":${JSON.stringify(order.shipDate)}`
  const canonical = `{"petId":${order.petId.toString()},"quantity":${order.quantity}${shipDate}}`
  return hash('sha256', canonical, 'hex')
}
