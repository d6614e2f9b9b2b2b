import { parseInt64, INT64_MAX } from '../../domain/int64.js'
import { MAX_METADATA_KEY_LENGTH, MAX_METADATA_KEYS, MAX_METADATA_VALUE_LENGTH } from '../../domain/order-metadata.js'
import type { Store } from '../../store/store.js'
import { CommandError, PROGRAM, UsageError, withStore, type Command } from '../command.js'

export const ordersImport: Command = {
  name: ['orders', 'import'],
  synopsis: 'orders import FILE',
  summary: 'import orders from a JSON array or NDJSON file (all or nothing)',
  positionals: [{ name: 'FILE', describe: 'a JSON array or NDJSON file of orders' }],
  help: `Usage: ${PROGRAM} orders import FILE

Imports the orders of FILE in one transaction: every record is inserted or, when an order with
its id exists, updated (the same id twice in a file: the last one wins) — or, at the first bad
record, nothing at all is imported and the error names the record and what is wrong with it.
The file is streamed: its size does not matter, but one record may take at most 1 MiB (an NDJSON
line or an array element). A file with no records imports nothing and warns on stderr (exit 0).

FILE is a JSON array of orders, or NDJSON (one order a line; blank lines are skipped): a file
whose first character (after whitespace) is "[" is read as an array. Positions in errors are
"record N" (1-based) in an array and "line N" in NDJSON; malformed JSON is reported by line
and column.

An order record:
  id         required; an integer from 1 to ${INT64_MAX}, written as a JSON
             integer or a decimal string (ids are exact whatever their size)
  petId      optional; an integer in the same range
  quantity   optional; an integer from 1 to 2147483647
  shipDate   optional; an RFC 3339 date-time with a timezone (2026-11-25T10:00:00Z,
             2026-11-25T11:00:00+01:00), stored in UTC
  complete   optional; true or false (default false); true only for a shipped order
  status     optional; pending (default), shipped or cancelled
  cancelledAt         optional, cancelled orders only; when it was cancelled, an RFC 3339
                      date-time with a timezone, stored in UTC to the millisecond
                      (default: the time of the import)
  cancellationReason  optional, cancelled orders only; customer_request, out_of_stock,
                      duplicate, fraudulent or other (default: none)
  metadata   optional, any status; the store's own keys and values: an object of at most
             ${MAX_METADATA_KEYS} keys, each 1 to ${MAX_METADATA_KEY_LENGTH} characters of A-Z a-z 0-9 _ - . :, each value a
             string of at most ${MAX_METADATA_VALUE_LENGTH} characters; {} is none
null is the same as leaving a field out; any other field is refused. A record is the whole
order: an order that exists takes the record's fields and loses those it leaves out (a record
without metadata removes the order's metadata, as one without petId removes its petId). A
record that would not change its order writes nothing (same version, no event); one that
changes it moves its version on by one and records an order.updated event. Status only moves
forward: an import cannot make a shipped or cancelled order pending again, nor a cancelled one
shipped. An order already cancelled keeps its first cancellation's time and reason: an import
never changes them.

Shows progress on stderr when stderr is a terminal.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} orders import orders.json
  ${PROGRAM} orders import export-2026-11.ndjson

  orders.json:    [{"id": 10, "petId": 198772, "quantity": 7,
                    "shipDate": "2026-11-25T10:00:00Z", "status": "pending"}]
  orders.ndjson:  {"id": 9223372036854775807, "petId": 1, "status": "shipped", "complete": true}
                  {"id": 11, "status": "cancelled", "cancelledAt": "2026-11-20T08:15:00Z",
                   "cancellationReason": "out_of_stock"}
                  {"id": 12, "petId": 4, "metadata": {"customer": "c-1042", "channel": "web"}}`,
  async run({ positionals }, io) {
    // The JSON parsers are loaded when a file is imported, not for --help.
    const [{ importFile }, { readOrderRecords }] = await Promise.all([import('./import-file.js'), import('../../domain/import-records.js')])
    await importFile(io, positionals[0]!, 'orders', (source) => readOrderRecords(source), (store, records, onProgress) =>
      store.orders.import(records, onProgress),
    )
  },
}

/** The ID positional of `orders ship` and `orders complete`. */
function orderId(text: string): bigint {
  const id = parseInt64(text)
  if (id === undefined || id < 1n) {
    throw new UsageError(`ID must be an order id, an integer from 1 to ${INT64_MAX}, got ${JSON.stringify(text)}`)
  }
  return id
}

/**
 * The run of `orders ship` and `orders complete`: `write` the order ID, then print what `answers`
 * gives its outcome, or fail with it when it is an error.
 */
function orderWrite<Outcome extends string>(
  write: (store: Store, id: bigint) => Promise<{ outcome: Outcome }>,
  // The CLI names no version (If-Match): a write of it never fails a precondition.
  answers: (id: bigint) => Record<Exclude<Outcome, 'precondition_failed'>, string | CommandError>,
): Command['run'] {
  return async ({ positionals }, io) => {
    const id = orderId(positionals[0]!)
    const { outcome } = await withStore(io, (store) => write(store, id))
    const answer = (answers(id) as Record<Outcome, string | CommandError>)[outcome]
    if (answer instanceof CommandError) throw answer
    io.stdout.write(`${answer}\n`)
  }
}

export const ordersShip: Command = {
  name: ['orders', 'ship'],
  synopsis: 'orders ship ID',
  summary: 'mark a pending order as shipped',
  positionals: [{ name: 'ID', describe: 'the id of the order to ship' }],
  help: `Usage: ${PROGRAM} orders ship ID

Marks the pending order ID as shipped and records when (shippedAt). An order that is
already shipped is left as it is and the command succeeds (exit 0), saying so: shipping is
idempotent. Once shipped, an order cannot be cancelled (cancelOrder answers 409). A cancelled
order is never shipped: the command refuses it (exit 1), as it does an order that does not
exist. It is the API's shipOrder, with the same order.shipped event.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} orders ship 10
  ${PROGRAM} orders ship 9223372036854775807`,
  run: orderWrite((store, id) => store.orders.ship(id), (id) => ({
    shipped: `order ${id} shipped`,
    already_shipped: `order ${id} was already shipped; nothing changed`,
    cancelled: new CommandError(`order ${id} is cancelled; a cancelled order cannot be shipped`),
    not_found: new CommandError(`order ${id} does not exist`),
  })),
}

export const ordersComplete: Command = {
  name: ['orders', 'complete'],
  synopsis: 'orders complete ID',
  summary: 'mark a shipped order as complete',
  positionals: [{ name: 'ID', describe: 'the id of the order to complete' }],
  help: `Usage: ${PROGRAM} orders complete ID

Marks the shipped order ID as complete (fulfilled), and records when (completedAt). An order
already complete is left as it is and the command succeeds (exit 0), saying so: completing is
idempotent. Only a shipped order can be completed: the command refuses a pending order (ship it
first) and a cancelled one (exit 1), as it does an order that does not exist. It is the API's
completeOrder, with the same order.completed event.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} orders complete 10
  ${PROGRAM} orders complete 9223372036854775807`,
  run: orderWrite((store, id) => store.orders.complete(id), (id) => ({
    completed: `order ${id} completed`,
    already_complete: `order ${id} was already complete; nothing changed`,
    not_shipped: new CommandError(`order ${id} is pending; only a shipped order can be completed (ship it first: orders ship ${id})`),
    cancelled: new CommandError(`order ${id} is cancelled; a cancelled order cannot be completed`),
    not_found: new CommandError(`order ${id} does not exist`),
  })),
}
