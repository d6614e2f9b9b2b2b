import { hashApiKey, isActive, SCOPES } from '../domain/api-keys.js'
import { createKey } from '../keys/create-key.js'
import { ImportConflictError, type Store } from '../store/store.js'
import { readDemoKey, writeDemoKey } from './demo-key-file.js'
import { seedDemoData, type SeedProgress } from './seed-demo-data.js'

export const DEMO_ORDERS = 1000
/** The name of the key `serve --demo` creates. */
export const DEMO_KEY_NAME = 'demo'

export interface DemoPreparation {
  /** The demo key: the stored one while it is valid, else a new one. */
  secret: string
  /** Whether the key was made by this start (none stored, or the stored one no longer valid). */
  created: boolean
  /** Why the new key could not be stored (it still works; the next start makes another). */
  notStored?: string
  /** How many demo orders were seeded; undefined when orders were already listed. */
  seeded: number | undefined
  /** Why seeding was skipped, when it was refused (every order cancelled, demo ids among them). */
  notSeeded?: string
}

/**
 * For `serve --demo`: demo data when no order is listed, and the demo key kept in `keyFile`
 * (demo-key-file.ts). The stored key is reused while the store still holds it valid (found by its
 * hash, neither revoked nor expired); otherwise a full-scope key named "demo" is created and stored.
 * No key is revoked: another instance's clients may be using theirs.
 */
export async function prepareDemo(store: Store, keyFile: string, progress?: SeedProgress): Promise<DemoPreparation> {
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
  const stored = await readDemoKey(keyFile).catch(() => undefined) // unreadable: replaced, as a missing one
  if (stored !== undefined) {
    const key = await store.apiKeys.findByHash(hashApiKey(stored))
    // A key kept from a build that had fewer scopes is replaced: the demo key has every scope.
    const everyScope = key !== undefined && SCOPES.every((scope) => key.scopes.includes(scope))
    if (key !== undefined && everyScope && isActive(key, Date.now())) return { secret: stored, created: false, seeded, notSeeded }
  }
  const { secret } = await createKey(store.apiKeys, { name: DEMO_KEY_NAME, scopes: [...SCOPES] })
  let notStored: string | undefined
  try {
    await writeDemoKey(keyFile, secret)
  } catch (error) {
    notStored = (error as Error).message
  }
  return { secret, created: true, notStored, seeded, notSeeded }
}
