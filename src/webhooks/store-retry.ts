import { setTimeout as sleep } from 'node:timers/promises'
import { StoreUnavailableError } from '../store/store.js'

/** How long a write under a lease is tried again while the store is unavailable (SQLite busy). */
const STORE_RETRY_MS = 3000

/**
 * A store call of a delivery loop, tried again while the store is briefly unavailable (on SQLite,
 * another process holding the write lock past the server's short busy timeout): a 2xx whose
 * `advance` failed would be sent again, and a lease whose `release` failed would stay held until it
 * expires. Safe to repeat: a failed call wrote nothing, and every write checks the lease.
 */
export async function retryWhileUnavailable<T>(work: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + STORE_RETRY_MS
  for (let wait = 5; ; wait = Math.min(2 * wait, 100)) {
    try {
      return await work()
    } catch (error) {
      if (!(error instanceof StoreUnavailableError) || Date.now() + wait > deadline) throw error
      await sleep(wait * (0.5 + Math.random()))
    }
  }
}
