import { write, writeSync } from 'node:fs'

/** A batch is handed on once the next line might not fit in this many bytes (≈ 90 access lines)… */
const BATCH_BYTES = 16 * 1024
/** The most UTF-8 bytes one UTF-16 code unit of a JavaScript string can take. */
const MAX_BYTES_PER_UNIT = 3
/** …or this long after its first line, whichever comes first. */
const FLUSH_INTERVAL_MS = 250
/** A full non-blocking pipe (EAGAIN: stdout once Node has opened it as a stream) is tried again this often… */
const RETRY_MS = 10
/** …and, at exit, for at most this long before the lines are given up (and that is reported). */
const EXIT_WRITE_LIMIT_MS = 10_000

/**
 * The server's log destination: lines collected in memory and written to a file descriptor in
 * batches, off the event loop.
 *
 * One write per line would be a system call per request. pino's own destination (sonic-boom) can
 * buffer by itself (`minLength`), but it appends each line to one growing string and measures that
 * string's UTF-8 length on every write, a pass over everything buffered so far: 5.9 against 3.5 µs
 * a line (`bench/log-lines.ts`). So each line is encoded once, into a batch buffer, and whole
 * batches are written, one at a time and in order.
 *
 * At exit (an uncaught error or `process.exit()` included) whatever is not yet written is written
 * synchronously: only a SIGKILL can lose the last FLUSH_INTERVAL_MS of lines. Lines that cannot be
 * written are counted and reported: to `flush`'s callback, by `flushSync`'s error (on stderr at
 * exit), and on stderr at once when no flush is waiting for them.
 */
export class BatchedDestination {
  private batch = Buffer.allocUnsafe(BATCH_BYTES)
  private used = 0
  private timer: NodeJS.Timeout | undefined
  /** Batches handed on, oldest first; while `inFlight`, the first is being written. */
  private readonly queue: Buffer[] = []
  private inFlight = false
  private retry: NodeJS.Timeout | undefined
  private waiting: ((error?: Error) => void)[] = []
  private lostBytes = 0
  private failure: Error | undefined

  /** `label` starts each line this reports on stderr (`petstore-orders: …`). */
  constructor(
    private readonly fd: number,
    private readonly label = 'log destination',
  ) {
    live.add(this)
  }

  /** Called by pino with one serialized line (newline included). */
  write(line: string): boolean {
    const most = line.length * MAX_BYTES_PER_UNIT
    if (this.used + most > BATCH_BYTES) {
      this.handOn()
      if (most > BATCH_BYTES) {
        this.enqueue(Buffer.from(line)) // a line longer than a batch goes on its own
        return true
      }
    }
    this.used += this.batch.write(line, this.used)
    this.timer ??= setTimeout(() => this.handOn(), FLUSH_INTERVAL_MS).unref()
    return true
  }

  /**
   * pino's `logger.flush(cb)`: everything logged so far is written, then `cb` — with the error
   * when a write failed since the previous flush.
   */
  flush(callback: (error?: Error) => void = () => {}): void {
    this.handOn()
    this.waiting.push(callback)
    if (this.queue.length === 0) process.nextTick(() => this.queue.length === 0 && this.settle())
  }

  /**
   * Writes every line not yet written now, blocking: the exit path. A batch in the middle of an
   * asynchronous write is left to it (it was handed to the system already). Throws when lines
   * could not be written.
   */
  flushSync(): void {
    clearTimeout(this.timer)
    this.timer = undefined
    clearTimeout(this.retry)
    this.retry = undefined
    if (this.used > 0) {
      this.queue.push(this.batch.subarray(0, this.used))
      this.batch = Buffer.allocUnsafe(BATCH_BYTES)
      this.used = 0
    }
    const pending = this.queue.splice(this.inFlight ? 1 : 0)
    const deadline = Date.now() + EXIT_WRITE_LIMIT_MS
    for (let i = 0; i < pending.length; i++) {
      try {
        writeAllSync(this.fd, pending[i]!, deadline)
      } catch (error) {
        this.lose(pending.slice(i), error as Error)
        break
      }
    }
    // With a write in flight, that write settles the waiting flushes.
    const error = this.queue.length === 0 ? this.settle() : this.takeFailure()
    if (error !== undefined) throw error
  }

  private handOn(): void {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.used === 0) return
    const full = this.batch.subarray(0, this.used)
    this.batch = Buffer.allocUnsafe(BATCH_BYTES) // `full` is held until it is written
    this.used = 0
    this.enqueue(full)
  }

  private enqueue(buffer: Buffer): void {
    this.queue.push(buffer)
    if (!this.inFlight && this.retry === undefined) this.writeNext()
  }

  private writeNext(): void {
    this.retry = undefined
    const buffer = this.queue[0]
    if (buffer === undefined) {
      this.settle()
      return
    }
    this.inFlight = true
    write(this.fd, buffer, 0, buffer.length, null, (error, written) => {
      this.inFlight = false
      if (this.queue[0] !== buffer) return // flushSync took the queue over
      if (error?.code === 'EAGAIN') {
        // A full non-blocking pipe: its reader is behind. Unreferenced: at exit, flushSync takes over.
        this.retry = setTimeout(() => this.writeNext(), RETRY_MS).unref()
        return
      }
      if (error !== null) {
        if (this.lostBytes === 0 && this.waiting.length === 0) this.report(`log lines could not be written: ${error.message}`)
        this.lose(this.queue.splice(0, 1), error)
      } else if (written < buffer.length) this.queue[0] = buffer.subarray(written)
      else this.queue.shift()
      this.writeNext()
    })
  }

  /** One line on stderr, now: `<label>: <message>`. */
  report(message: string): void {
    reportSync(`${this.label}: ${message}`)
  }

  /** Lines that cannot be written: counted, and the error kept for the next flush. */
  private lose(buffers: Buffer[], error: Error): void {
    this.lostBytes += buffers.reduce((sum, buffer) => sum + buffer.length, 0)
    this.failure ??= error
  }

  /**
   * Everything handed on is written or lost: the waiting flushes are called back, with an error
   * counting every byte lost so far when a write failed since the previous flush. Returns that error.
   */
  private settle(): Error | undefined {
    const error = this.takeFailure()
    const callbacks = this.waiting
    this.waiting = []
    for (const callback of callbacks) callback(error)
    return error
  }

  /** The failure since the previous flush, as an error counting every byte lost so far. */
  private takeFailure(): Error | undefined {
    const failure = this.failure
    this.failure = undefined
    return failure === undefined ? undefined : new Error(`${this.lostBytes} bytes of log lines lost: ${failure.message}`, { cause: failure })
  }
}

/** Writes all of `buffer`, waiting out a full non-blocking pipe until `deadline`. */
function writeAllSync(fd: number, buffer: Buffer, deadline: number): void {
  let offset = 0
  while (offset < buffer.length) {
    try {
      offset += writeSync(fd, buffer, offset)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN' || Date.now() > deadline) throw error
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, RETRY_MS)
    }
  }
}

/** One line on stderr, written at once (this also runs at exit, when nothing asynchronous will). */
function reportSync(line: string): void {
  try {
    writeSync(2, `${line}\n`)
  } catch {
    // stderr is gone too: there is no one left to tell
  }
}

// One exit listener for every destination, however many servers a process starts.
const live = new Set<BatchedDestination>()
process.on('exit', () => {
  for (const destination of live) {
    try {
      destination.flushSync()
    } catch (error) {
      destination.report((error as Error).message)
    }
  }
})
