/** Where its lines go: the service's logger, or anything that writes lines like it (the CLI's stderr). */
export interface OutageSink {
  warn(fields: { reason: string; failures: number }, message: string): void
  info(fields: { failures: number }, message: string): void
}

/**
 * What an operator reads of a dependency that fails for a while (the database): one warning when it
 * starts failing, naming why, then at most one a minute however many requests and passes fail, and
 * one line when it answers again. A dependency that flaps (SQLite's write lock, taken and released
 * by an import) says so at most once a minute, not once per failure and per success.
 */
export class OutageLog {
  private saidAt: number | undefined
  private open = false
  private failuresSinceSaid = 0

  constructor(
    private readonly log: OutageSink,
    private readonly messages: { failing: string; answering: string },
    private readonly everyMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** A failure: said when the last warning is a minute old or more (or there was none). */
  failed(error: Error): void {
    this.failuresSinceSaid++
    const now = this.now()
    if (this.saidAt !== undefined && now - this.saidAt < this.everyMs) return
    this.log.warn({ reason: error.message, failures: this.failuresSinceSaid }, this.messages.failing)
    this.saidAt = now
    this.failuresSinceSaid = 0
    this.open = true
  }

  /** A success: said once after a warning, as the end of the outage it announced. */
  succeeded(): void {
    if (!this.open) return
    this.open = false
    this.log.info({ failures: this.failuresSinceSaid }, this.messages.answering)
  }
}
