import { ImportConflictError, type Store } from '../store/store.js'
import { createKey } from './create-key.js'
import { seedDemoData, type SeedProgress } from './seed-demo-data.js'

export const DEMO_ORDERS = 1000
/** The name of the key `serve --demo` creates; the keys of earlier demo starts are revoked. */
export const DEMO_KEY_NAME = 'demo'

export interface DemoPreparation {
  /** The new demo key, shown once. */
  secret: string
  /** How many demo orders were seeded; undefined when orders were already listed. */
  seeded: number | undefined
  /** Why seeding was skipped, when it was refused (every order cancelled, demo ids among them). */
  notSeeded?: string
  /** How many keys of earlier demo starts were revoked. */
  revoked: number
}

/**
 * For `serve --demo`: demo data when no order is listed, and a fresh full-scope key named "demo".
 * The raw key is shown only at its creation, so an earlier demo key cannot be shown again: it is
 * revoked instead, and one working demo key exists at a time (not one more on every start).
 */
export async function prepareDemo(store: Store, progress?: SeedProgress): Promise<DemoPreparation> {
  let seeded: number | undefined
  let notSeeded: string | undefined
  if (!(await store.orders.hasAny())) {
    try {
      seeded = (await seedDemoData(store, { orders: DEMO_ORDERS, seed: 1, firstOrderId: 1n }, progress)).orders
    } catch (error) {
      // Every order is cancelled, and the demo ids are among them: serve what there is.
      if (!(error instanceof ImportConflictError)) throw error
      notSeeded = error.message
    }
  }
  let revoked = 0
  for (const key of await store.apiKeys.list()) {
    if (key.name !== DEMO_KEY_NAME || key.revokedAt !== null) continue
    await store.apiKeys.revoke(key.id.toString())
    revoked++
  }
  const { secret } = await createKey(store.apiKeys, { name: DEMO_KEY_NAME })
  return { secret, seeded, notSeeded, revoked }
}
