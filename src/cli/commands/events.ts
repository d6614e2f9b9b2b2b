import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { parse, stringify } from 'lossless-json'
import { INT64_MAX } from '../../domain/int64.js'
import { EventsExpiredError, parseEventPosition, UnknownEventPositionError } from '../../domain/order-events.js'
import type { MaybePromise } from '../../maybe-async.js'
import type { OrderEventsRepository } from '../../store/order-events.js'
import { CommandError, PROGRAM, stringOption, UsageError, withStore, type Command, type Io, type OutputStream } from '../command.js'

/** Events read at a time: the store's largest page, so a backlog is printed in few reads. */
const TAIL_PAGE_SIZE = 1000
/** How often the data version is compared while the feed has nothing new. */
const TAIL_POLL_MS = 200

export const eventsTail: Command = {
  name: ['events', 'tail'],
  synopsis: 'events tail [--after CURSOR]',
  summary: 'print order events as NDJSON as they happen, until interrupted',
  options: { after: { type: 'string' } },
  help: `Usage: ${PROGRAM} events tail [--after CURSOR]

Prints the order event feed on stdout as NDJSON, one event a line, oldest first — every event
after CURSOR, or every event still retained — then each new event as it is committed (by the
API, an import, 'orders ship', …; within about a second), until SIGINT (Ctrl-C) or SIGTERM.
An event is {"id": "<position>", "type": "order.created" | "order.updated" | "order.shipped" |
"order.cancelled", "occurredAt": "<RFC 3339>", "order": {<the order as v2 shows it after the
change>}}, ids exact whatever their size.

When stopped it prints on stderr the command that resumes where it stopped, and exits 0
(if the database becomes unreachable, it prints the same line and exits 1):
  resume with: ${PROGRAM} events tail --after 1234
Resumed with that cursor, it prints exactly the events that followed the last one printed: none
twice, none missed. stdout holds nothing but events.

It reads the database directly, as every command here does. Events older than the retention of
the server (EVENTS_RETENTION_DAYS, default 30) may be deleted; a cursor before them is refused.

Options:
  --after CURSOR   print only the events after this one: an event's "id", the cursor of a
                   'resume with' line or an API response's nextCursor, a decimal integer
                   (default: from the oldest event retained)
  -h, --help       show this help

Examples:
  ${PROGRAM} events tail
  ${PROGRAM} events tail --after 1234 > events.ndjson
  ${PROGRAM} events tail | jq -c 'select(.type == "order.cancelled") | .order.id'`,
  async run({ values }, io) {
    const text = stringOption(values, 'after')
    const after = text === undefined ? undefined : afterOption(text)
    // Installed before the database is opened: an early Ctrl-C still stops cleanly. A second
    // signal finds no handler and ends the process at once, as an impatient operator expects.
    const stopping = new AbortController()
    const stop = (): void => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      stopping.abort()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
    try {
      await withStore(io, (store) => tailEvents(store.events, store.orders, { after, io, signal: stopping.signal }))
    } finally {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
    }
  },
}

/** `--after`: a position of the feed, as the API reads `after`. */
export function afterOption(text: string): bigint {
  try {
    return parseEventPosition(text)
  } catch {
    throw new UsageError(`--after must be a cursor of the event feed, a decimal integer from 0 to ${INT64_MAX} (an event's "id"), got ${JSON.stringify(text)}`)
  }
}

interface TailOptions {
  /** Print the events after this position; undefined: from the oldest retained. */
  after: bigint | undefined
  io: Io
  /** Aborted: stop, print the resume line, resolve. */
  signal: AbortSignal
}

/**
 * Prints every event after `after` as NDJSON, then waits for more: a transaction that writes
 * events bumps the data version, so the feed is read again only when the version has changed
 * since the last read began. Every line printed moves the cursor, and the cursor is printed on
 * stderr at the end (also when a read fails after the first one): resuming from it prints exactly
 * what followed.
 */
async function tailEvents(
  feed: OrderEventsRepository,
  orders: { dataVersion(): MaybePromise<bigint> },
  { after, io, signal }: TailOptions,
): Promise<void> {
  let cursor = after
  let started = false
  try {
    while (!signal.aborted) {
      const version = await orders.dataVersion() // before the read: a commit after it changes the version
      const page = await feed.read(cursor, TAIL_PAGE_SIZE)
      started = true
      if (page.count > 0) await write(io.stdout, ndjson(page.json))
      cursor = page.next
      if (page.count === TAIL_PAGE_SIZE) continue // a backlog: read on at once
      while (!signal.aborted && (await orders.dataVersion()) === version) {
        await sleep(TAIL_POLL_MS, undefined, { signal }).catch(() => {})
      }
    }
  } catch (error) {
    const problem = cursor === undefined ? error : cursorProblem(error, cursor === after ? `--after ${cursor}` : `the cursor ${cursor}`, 'start again without --after, from the oldest retained event')
    if (started) io.stderr.write(resumeLine(cursor))
    throw problem
  }
  io.stderr.write(resumeLine(cursor))
}

function resumeLine(cursor: bigint | undefined): string {
  return `resume with: ${PROGRAM} events tail${cursor === undefined ? '' : ` --after ${cursor}`}\n`
}

/** The feed's refusals of a cursor (`which` names it) as one-line errors; `remedy` says what to do about one too old. */
export function cursorProblem(error: unknown, which: string, remedy: string): unknown {
  if (error instanceof UnknownEventPositionError) {
    return new CommandError(`${which} is past the end of the event feed: no event of this database has had that position`)
  }
  if (error instanceof EventsExpiredError) return new CommandError(`${which} is too old: the events after it have been deleted by retention; ${remedy}`)
  return error
}

/** A page's JSON array as NDJSON: one line per event. Parsed losslessly: ids stay exact. */
function ndjson(json: Buffer): string {
  const events = parse(json.toString('utf8')) as unknown[]
  return events.map((event) => `${stringify(event)}\n`).join('')
}

/** Writes, and waits for the stream to drain when it asks to (a slow reader at the end of a pipe). */
async function write(stream: OutputStream, text: string): Promise<void> {
  const emitter = stream as unknown as Partial<NodeJS.EventEmitter>
  if (stream.write(text) === false && typeof emitter.once === 'function') await once(emitter as NodeJS.EventEmitter, 'drain')
}
