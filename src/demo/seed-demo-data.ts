import type { Store } from '../store/store.js'
import { demoOrders, demoPetCount, demoPets } from './demo-data.js'

export interface SeedOptions {
  orders: number
  seed: number
  firstOrderId: bigint
  now?: Date
}

export interface SeedResult {
  orders: number
  pets: number
}

/** Told how far seeding got: orders written so far, then the pets about to be written. */
export interface SeedProgress {
  orders(count: number): void
  pets(count: number): void
}

/**
 * Writes the demo orders, then their pets: two transactions, orders first, because only orders can
 * be refused (a status never moves back); pets are always accepted.
 */
export async function seedDemoData(store: Store, options: SeedOptions, progress?: SeedProgress): Promise<SeedResult> {
  const petCount = demoPetCount(options.orders)
  const orders = await store.orders.import(
    demoOrders({ orders: options.orders, seed: options.seed, firstOrderId: options.firstOrderId, now: options.now }),
    (count) => progress?.orders(count),
  )
  progress?.pets(petCount)
  const pets = await store.pets.import(demoPets(petCount))
  return { orders, pets }
}
