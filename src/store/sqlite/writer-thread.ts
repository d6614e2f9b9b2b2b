/**
 * The SQLite store's writer: a worker thread (started by write-batcher.ts) that owns the writer
 * connection and runs each batch of writes as one IMMEDIATE transaction. better-sqlite3 is
 * synchronous, so a commit's WAL sync (synchronous=FULL) holds the thread that runs it: here that is
 * not the event loop, which meanwhile goes on reading and answering requests and gathering the next
 * batch (docs/decisions.md).
 *
 * Messages in: a batch (`{ requests }`), or 'close'. Out, one per batch: its results in order, or
 * the error that rolled it back (its name, message and SQLite code: an Error does not cross whole).
 */
import { existsSync } from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'
import { connect } from './database.js'
import { BUMP_DATA_VERSION } from './migrations.js'
import { OrderWrites, type Batch } from './order-writes.js'
import { toThreadError } from './thread-error.js'
import type { WriteRequest, WriterOptions, WriterReply } from './write-batcher.js'

const { path, busyTimeoutMs } = workerData as WriterOptions
const port = parentPort!

interface Writer {
  commit(requests: WriteRequest[]): unknown[]
  close(): void
}

/** Opened at the first batch, as every connection is (a brief lock while it is set up is waited for, once); then never waits for the lock. */
function openWriter(): Writer {
  // The store has created and migrated the file: one gone since (its folder removed) is not made anew.
  const db = connect(path, false, busyTimeoutMs, true)
  try {
    db.pragma('busy_timeout = 0')
    const writes = new OrderWrites(db)
    const bump = db.prepare(BUMP_DATA_VERSION)
    const run = db.transaction((requests: WriteRequest[]) => {
      let changes = 0
      const batch: Batch = { now: new Date().toISOString(), changed: () => void changes++ }
      const results = requests.map(({ method, trace, args }) => (writes[method] as (...all: unknown[]) => unknown).call(writes, batch, trace, ...(args as unknown[])))
      if (changes > 0) bump.run()
      return results
    })
    return {
      commit: (requests) => {
        // An open connection writes on into a file removed under it (its folder deleted): writes
        // acknowledged there would be lost. Refused as the file being unopenable is, per batch.
        if (!existsSync(path)) throw Object.assign(new Error(`${path} is gone`), { code: 'SQLITE_CANTOPEN' })
        return run.immediate(requests)
      },
      close: () => db.close(),
    }
  } catch (error) {
    db.close()
    throw error
  }
}

let writer: Writer | undefined
port.on('message', (message: { requests: WriteRequest[] } | 'close') => {
  if (message === 'close') {
    writer?.close()
    port.close()
    return
  }
  let reply: WriterReply
  try {
    writer ??= openWriter()
    reply = { results: writer.commit(message.requests) }
  } catch (error) {
    reply = { error: toThreadError(error) }
  }
  port.postMessage(reply)
})
