import type { OrderMetadata } from '../../src/domain/order-metadata.js'
import type { OrderRecord } from '../../src/domain/orders.js'
import type { Pet } from '../../src/schemas/pet.js'

/**
 * The bench's data set: orders 1..N, deterministic, shaped like real ones. Every fourth order is
 * shipped (half of those complete), 1 in 50 cancelled (ids 25, 75, 125, …: what the v2 filter
 * `status=cancelled` finds), the rest pending; the v1 list has the 98% not cancelled. Ship dates are
 * spread over 2026. About 1 in 50 has no ship date and 1 in 200 no pet (omitted fields). 1,000,000
 * orders are ~91 MB of JSON.
 */
const SHIP_DATE_ORIGIN = Date.UTC(2026, 0, 1)

export function isShipped(id: number): boolean {
  return id % 4 === 0
}

export function isCancelled(id: number): boolean {
  return id % 50 === 25
}

export function isPending(id: number): boolean {
  return !isShipped(id) && !isCancelled(id)
}

export function orderRecord(id: number): OrderRecord {
  const shipped = isShipped(id)
  return {
    id: BigInt(id),
    petId: id % 200 === 0 ? null : BigInt(1 + ((id * 7919) % PETS)),
    quantity: 1 + (id % 5),
    // Spread over about a year, with milliseconds, as Date#toISOString() writes it.
    shipDate: id % 50 === 0 ? null : new Date(SHIP_DATE_ORIGIN + ((id * 31_536_017) % 31_536_000_000)).toISOString(),
    complete: shipped && id % 8 === 0,
    status: shipped ? 'shipped' : isCancelled(id) ? 'cancelled' : 'pending',
  }
}

export const PETS = 1000

/**
 * The metadata data set (comparison 13) is the same orders with metadata on 1 in 10 (ids 4, 14, 24,
 * …: half of them shipped, the rest pending), the rest without. The k-th of them (id 10k + 4) carries
 * three keys: `customer`, one of 1,000 customers, each on every 1,000th tagged order, so ~100 orders
 * spread over the whole data set (k mod 1000); `channel`, one of four, in runs of 1,000 tagged
 * orders (⌊k / 1000⌋ mod 4), so a customer's orders are spread evenly over the channels; and
 * `cart`, the order's own.
 */
export const TAGGED_EVERY = 10
const TAGGED_AT = 4
export const CUSTOMERS = 1000
export const CHANNELS = ['web', 'store', 'phone', 'partner'] as const
export const CHANNEL_RUN = 1000

export function isTagged(id: number): boolean {
  return id % TAGGED_EVERY === TAGGED_AT
}

export function customerName(customer: number): string {
  return `cus_${String(customer).padStart(6, '0')}`
}

export function cartName(id: number): string {
  return `cart_${String(id).padStart(9, '0')}`
}

/** The metadata of order `id` in the metadata data set; undefined for the 9 in 10 without. */
export function orderMetadata(id: number): OrderMetadata | undefined {
  if (!isTagged(id)) return undefined
  const k = (id - TAGGED_AT) / TAGGED_EVERY
  return { customer: customerName(k % CUSTOMERS), channel: CHANNELS[Math.floor(k / CHANNEL_RUN) % CHANNELS.length]!, cart: cartName(id) }
}

/** Lazily generated: memory does not depend on `count`. With `metadata`, the metadata data set's. */
export async function* orderRecords(count: number, options: { metadata?: boolean } = {}): AsyncGenerator<OrderRecord> {
  for (let id = 1; id <= count; id++) {
    const record = orderRecord(id)
    if (options.metadata === true) {
      const metadata = orderMetadata(id)
      if (metadata !== undefined) record.metadata = metadata
    }
    yield record
  }
}

export async function* petRecords(count: number): AsyncGenerator<Pet> {
  const names = ['doggie', 'kitty', 'goldie', 'polly', 'rex']
  for (let id = 1; id <= count; id++) {
    const pet: Pet = { id: BigInt(id), name: `${names[id % names.length]!}-${id}` }
    if (id % 3 !== 0) pet.tag = id % 2 === 0 ? 'dog' : 'cat'
    yield pet
  }
}

/**
 * Hands out pending order ids, each once, in ascending order: the version bumps of the list benches
 * and the cancel benches never cancel the same order twice.
 */
export class PendingIds {
  private next = 1

  constructor(private readonly orders: number) {}

  /** Up to `count` pending ids not handed out before (fewer when the data set runs out). */
  take(count: number): number[] {
    const ids: number[] = []
    while (ids.length < count && this.next <= this.orders) {
      if (isPending(this.next)) ids.push(this.next)
      this.next++
    }
    return ids
  }

  remaining(): number {
    let count = 0
    for (let id = this.next; id <= this.orders; id++) if (isPending(id)) count++
    return count
  }
}
