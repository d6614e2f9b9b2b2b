/**
 * A backup's copy (`VACUUM INTO`), on a worker thread with a read-only connection of its own
 * (started by database.ts's backupTo): better-sqlite3 is synchronous, and a copy of a large database
 * on the main thread would hold it for minutes, with no signal handled (an interrupted backup could
 * not remove its partial file). One read transaction: a consistent snapshot whatever else writes.
 *
 * In: `{ source, target }`. Out: `{ done: true }`, or the error (its name, message and SQLite code).
 */
import { parentPort, workerData } from 'node:worker_threads'
import { connect } from './database.js'
import { toThreadError } from './thread-error.js'

const { source, target } = workerData as { source: string; target: string }
const db = connect(source, true, 5_000)
try {
  db.prepare('VACUUM INTO ?').run(target)
  parentPort!.postMessage({ done: true })
} catch (error) {
  parentPort!.postMessage({ error: toThreadError(error) })
} finally {
  db.close()
}
