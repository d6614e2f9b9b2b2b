import { setTimeout as sleep } from 'node:timers/promises'
import { StoreUnavailableError } from './store.js'

/** How often a start waits to ask the database again, and how often it says it is still waiting. */
export const RETRY_EVERY_MS = 2_000
const SAY_AGAIN_EVERY_MS = 60_000

/** What a start that waits tells its operator. */
export interface WaitReporter {
  /** The database is unavailable: the first time, then every SAY_AGAIN_EVERY_MS, with how long so far. */
  waiting(error: StoreUnavailableError, waitedMs: number): void
  /** It answered after having been waited for. */
  answered(waitedMs: number): void
}

/**
 * `work` (opening a database, migrating it), tried again every RETRY_EVERY_MS while the database is
 * unavailable in a way that passes (StoreUnavailableError's `passing`: a server down or restarting,
 * another process's write lock), until it answers or `signal` aborts (then the abort's error). A
 * process started with its database (a reboot, a deploy during maintenance, an import holding
 * SQLite's lock) starts once it answers, instead of exiting into a supervisor's restart limit; any
 * other error, a wrong password or a file that is no database, is thrown at once.
 */
export async function untilAvailable<T>(work: () => Promise<T>, report: WaitReporter, signal?: AbortSignal, now = Date.now): Promise<T> {
  const started = now()
  let saidAt: number | undefined
  for (;;) {
    try {
      const result = await work()
      if (saidAt !== undefined) report.answered(now() - started)
      return result
    } catch (error) {
      if (!(error instanceof StoreUnavailableError) || !error.passing) throw error
      if (saidAt === undefined || now() - saidAt >= SAY_AGAIN_EVERY_MS) {
        saidAt = now()
        report.waiting(error, saidAt - started)
      }
    }
    await sleep(RETRY_EVERY_MS, undefined, { signal })
  }
}
