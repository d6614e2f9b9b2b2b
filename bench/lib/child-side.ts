/**
 * What every child process of the bench (servers, seeder, downloader) shares: it tells the parent
 * about itself over the IPC channel, and stops cleanly on SIGTERM or when the parent goes away.
 */

/** Sends one message to the bench process. */
export function tell(message: { type: string } & Record<string, unknown>): void {
  if (process.send === undefined) throw new Error('this script is started by bench/run.ts (it needs an IPC channel)')
  process.send(message)
}

/** Runs `stop` once on SIGTERM, SIGINT or loss of the parent, then exits (0, or 1 if `stop` failed). */
export function onShutdown(stop: () => Promise<void> | void): void {
  let stopping = false
  const shutdown = (): void => {
    if (stopping) return
    stopping = true
    Promise.resolve()
      .then(stop)
      .then(
        () => process.exit(0),
        (error: unknown) => {
          console.error(error)
          process.exit(1)
        },
      )
  }
  process.on('SIGTERM', shutdown)
  process.on('SIGINT', shutdown)
  process.on('disconnect', shutdown)
}

/** Reports a failure of the child to the parent (which prints it) and exits non-zero. */
export function failed(error: unknown): never {
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error)
  try {
    tell({ type: 'error', message })
  } catch {
    // no parent to tell: stderr only
  }
  console.error(message)
  process.exit(1)
}
