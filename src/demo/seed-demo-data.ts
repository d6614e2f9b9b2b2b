import type { Store } from '../store/store.js'
import { demoOrders, demoPetCount, demoPets, type DemoOrderOptions } from './demo-data.js'

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
export async function seedDemoData(store: Store, options: DemoOrderOptions, progress?: SeedProgress): Promise<SeedResult> {
  const petCount = demoPetCount(options.orders)
  const orders = await store.orders.import(demoOrders(options), (count) => progress?.orders(count))
  progress?.pets(petCount)
  const pets = await store.pets.import(demoPets(petCount))
  return { orders, pets }
}
