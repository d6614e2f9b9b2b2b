import { setTimeout as sleep } from 'node:timers/promises'
import type { OutageLog } from '../outage-log.js'
import { StoreUnavailableError } from './store.js'

/** How often a start waits to ask the database again. */
export const RETRY_EVERY_MS = 2_000

/**
 * `work` (opening a database, migrating it), tried again every RETRY_EVERY_MS while the database is
 * unavailable in a way that passes (StoreUnavailableError's `passing`: a server down or restarting,
 * another process's write lock), until it answers or `signal` aborts (then the abort's error). A
 * process started with its database (a reboot, a deploy during maintenance, an import holding
 * SQLite's lock) starts once it answers, instead of exiting into a supervisor's restart limit; any
 * other error, a wrong password or a file that is no database, is thrown at once. Each failure and
 * the answer go to `outages`, which says the wait when it begins, once a minute while it lasts, and
 * its end.
 */
export async function untilAvailable<T>(work: () => Promise<T>, outages: Pick<OutageLog, 'failed' | 'succeeded'>, signal?: AbortSignal): Promise<T> {
  for (;;) {
    try {
      const result = await work()
      outages.succeeded()
      return result
    } catch (error) {
      if (!(error instanceof StoreUnavailableError) || !error.passing) throw error
      outages.failed(error)
    }
    await sleep(RETRY_EVERY_MS, undefined, { signal })
  }
}
