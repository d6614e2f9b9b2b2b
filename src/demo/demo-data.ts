/**
 * Demo data for `seed` and `serve --demo`: realistic orders and the pets they name, generated one
 * at a time (a million orders take no more memory than ten).
 *
 * Deterministic: the same options give the same records. Pets depend only on their number (pet 7
 * is always the same pet), orders on the seed; ship dates are offsets from the start of the UTC day
 * of `now`, so a seed reproduces the same orders all day.
 */
import type { Pet } from '../schemas/pet.js'
import { INT64_MAX } from '../domain/int64.js'
import type { OrderRecord, OrderStatus } from '../domain/orders.js'

export interface DemoOrderOptions {
  /** How many orders. */
  orders: number
  /** The id of the first order; the others follow it. */
  firstOrderId?: bigint
  /** PRNG seed, an integer from 0 to 2^32−1. */
  seed?: number
  /** Ship dates are around this day. */
  now?: Date
}

export const MAX_DEMO_ORDERS = 10_000_000
const MAX_DEMO_PETS = 100_000
const DAY_MS = 86_400_000
const MINUTE_MS = 60_000

/** How many pets `count` demo orders refer to: one for every four orders, from 1 to 100,000. */
export function demoPetCount(orders: number): number {
  return Math.min(MAX_DEMO_PETS, Math.max(1, Math.ceil(orders / 4)))
}

/** Pets 1 to `count`. */
export async function* demoPets(count: number): AsyncGenerator<Pet> {
  const random = mulberry32(0x5eed_9e75)
  for (let i = 1; i <= count; i++) {
    const kind = pick(random, KINDS)
    const name = `${pick(random, NAMES)}${random() < 0.3 ? ` ${pick(random, SURNAMES)}` : ''}`
    // One pet in ten has no tag: Pet.tag is optional.
    yield random() < 0.1 ? { id: BigInt(i), name } : { id: BigInt(i), name, tag: kind }
  }
}

/**
 * Orders `firstOrderId` … `firstOrderId + orders − 1`: about 60% pending, 30% shipped, 10% cancelled;
 * quantities 1–10 (mostly small); pending orders ship within three weeks (a few are not scheduled
 * yet), shipped ones shipped in the last two months (complete once they are a few days old).
 */
export async function* demoOrders(options: DemoOrderOptions): AsyncGenerator<OrderRecord> {
  const { orders, firstOrderId = 1n, seed = 1, now = new Date() } = options
  if (!Number.isSafeInteger(orders) || orders < 0) throw new RangeError('orders must be a non-negative integer')
  if (firstOrderId < 1n || firstOrderId + BigInt(Math.max(orders, 1)) - 1n > INT64_MAX) {
    throw new RangeError('order ids must stay from 1 to 2^63−1')
  }
  const random = mulberry32(seed)
  const pets = demoPetCount(orders)
  const today = Math.floor(now.getTime() / DAY_MS) * DAY_MS
  const minutes = (days: number): number => Math.floor(days * (DAY_MS / MINUTE_MS)) * MINUTE_MS
  for (let i = 0; i < orders; i++) {
    const roll = random()
    const status: OrderStatus = roll < 0.6 ? 'pending' : roll < 0.9 ? 'shipped' : 'cancelled'
    let shipDate: number | null
    let complete = false
    if (status === 'pending') {
      shipDate = random() < 0.08 ? null : today + minutes(0.1 + random() * 21)
    } else if (status === 'shipped') {
      const age = random() * 60
      shipDate = today - minutes(age)
      complete = age > 3 && random() < 0.9
    } else {
      shipDate = today + minutes(random() * 44 - 30)
    }
    yield {
      id: firstOrderId + BigInt(i),
      petId: BigInt(1 + Math.floor(random() * pets)),
      quantity: 1 + Math.floor(10 * random() ** 3), // 1 in about half the orders, 10 rarely
      shipDate: shipDate === null ? null : new Date(shipDate).toISOString(),
      complete,
      status,
    }
  }
}

/** A small, fast, seedable PRNG (mulberry32): uniform in [0, 1). */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!
}

const KINDS = ['dog', 'dog', 'dog', 'cat', 'cat', 'cat', 'bird', 'rabbit', 'fish', 'hamster', 'guinea pig', 'turtle'] as const
const NAMES = [
  'Rex', 'Bella', 'Luna', 'Max', 'Charlie', 'Milo', 'Daisy', 'Lucy', 'Cooper', 'Bailey', 'Rocky', 'Coco',
  'Oscar', 'Ruby', 'Teddy', 'Rosie', 'Buddy', 'Molly', 'Leo', 'Lola', 'Simba', 'Nala', 'Pepper', 'Ginger',
  'Biscuit', 'Mochi', 'Pickles', 'Waffles', 'Olive', 'Hazel', 'Ziggy', 'Bruno', 'Sunny', 'Kiwi', 'Noodle',
  'Maple', 'Shadow', 'Pumpkin', 'Scout', 'Winston', 'Poppy', 'Felix', 'Cleo', 'Archie', 'Tilly', 'Hugo',
] as const
const SURNAMES = ['the Brave', 'Jr.', 'the Second', 'of the Garden', 'the Quick', 'the Sleepy', 'Sr.'] as const
