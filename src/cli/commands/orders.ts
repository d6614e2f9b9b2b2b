import { parseDateTime } from '../../domain/date-time.js'
import { parseInt64, INT64_MAX } from '../../domain/int64.js'
import {
  MAX_METADATA_KEY_LENGTH,
  MAX_METADATA_KEYS,
  MAX_METADATA_VALUE_LENGTH,
  metadataKeyProblem,
  metadataValueProblem,
  type OrderMetadata,
} from '../../domain/order-metadata.js'
import type { OrderPatch, OrderPrevious, UpdateResult } from '../../domain/order-patch.js'
import type { OrderV2Record } from '../../domain/orders.js'
import { MAX_PLACE_QUANTITY } from '../../schemas/order-v2.js'
import type { Store } from '../../store/store.js'
import { CommandError, PROGRAM, stringOption, stringsOption, UsageError, withStore, type Command, type OptionValues } from '../command.js'

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
    const [{ importFile }, { readOrderRecords }] = await Promise.all([import('./import-file.js'), import('../import-records.js')])
    await importFile(io, positionals[0]!, 'orders', (source) => readOrderRecords(source), (store, records, onProgress) =>
      store.orders.import(records, onProgress),
    )
  },
}

/** The ID positional of `orders ship`, `orders complete` and `orders update`. */
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

/**
 * The patch `orders update` asks for, checked by the rules the API's updateOrder applies: petId an
 * int64 of 1 or more, quantity 1–1000 (placeOrder's), the ship date RFC 3339 with a timezone, each
 * metadata key and value by domain/order-metadata.ts, at most 50 keys named. A problem is a
 * UsageError naming the option: nothing is opened, nothing written.
 */
function updatePatch(values: OptionValues): OrderPatch {
  const patch: OrderPatch = {}
  const petId = stringOption(values, 'pet-id')
  if (petId !== undefined) {
    const parsed = parseInt64(petId)
    if (parsed === undefined || parsed < 1n) throw new UsageError(`--pet-id must be a pet id, an integer from 1 to ${INT64_MAX}, got ${JSON.stringify(petId)}`)
    patch.petId = parsed
  }
  const quantity = stringOption(values, 'quantity')
  if (quantity !== undefined) {
    const parsed = /^[0-9]{1,10}$/.test(quantity) ? Number(quantity) : Number.NaN
    if (!(parsed >= 1 && parsed <= MAX_PLACE_QUANTITY)) throw new UsageError(`--quantity must be an integer from 1 to ${MAX_PLACE_QUANTITY}, got ${JSON.stringify(quantity)}`)
    patch.quantity = parsed
  }
  const shipDate = stringOption(values, 'ship-date')
  if (shipDate !== undefined && values['no-ship-date'] === true) throw new UsageError('--ship-date and --no-ship-date cannot both be given')
  if (shipDate !== undefined) {
    const parsed = parseDateTime(shipDate)
    if (parsed === undefined) {
      throw new UsageError(`--ship-date must be an RFC 3339 date-time with a timezone, such as 2026-12-01T10:00:00Z, got ${JSON.stringify(shipDate)}`)
    }
    patch.shipDate = parsed
  }
  if (values['no-ship-date'] === true) patch.shipDate = null

  const metadata = new Map<string, string | null>()
  const name = (key: string, value: string | null): void => {
    if (metadata.has(key)) throw new UsageError(`metadata key ${JSON.stringify(key)} is given more than once`)
    metadata.set(key, value)
  }
  for (const pair of stringsOption(values, 'meta')) {
    const equals = pair.indexOf('=')
    if (equals < 0) throw new UsageError(`--meta must be KEY=VALUE, got ${JSON.stringify(pair)}`)
    const [key, value] = [pair.slice(0, equals), pair.slice(equals + 1)]
    const problem = metadataKeyProblem(key) ?? metadataValueProblem(key, value)
    if (problem !== undefined) throw new UsageError(`--meta: ${problem}`)
    name(key, value)
  }
  for (const key of stringsOption(values, 'unset-meta')) {
    const problem = metadataKeyProblem(key)
    if (problem !== undefined) throw new UsageError(`--unset-meta: ${problem}`)
    name(key, null)
  }
  if (metadata.size > MAX_METADATA_KEYS) {
    throw new UsageError(`--meta and --unset-meta may name at most ${MAX_METADATA_KEYS} keys, got ${metadata.size}`)
  }
  if (metadata.size > 0) patch.metadata = metadata
  if (Object.keys(patch).length === 0) {
    throw new UsageError('nothing to change: give --pet-id, --quantity, --ship-date, --no-ship-date, --meta or --unset-meta')
  }
  return patch
}

/** What an update changed, field by field, as `orders update` says it: `quantity 2 -> 3`, `metadata note set`. */
function changes(previous: OrderPrevious, order: OrderV2Record): string[] {
  const shown = (value: bigint | number | string | null | undefined): string => (value === null || value === undefined ? 'none' : String(value))
  const said: string[] = []
  if (previous.petId !== undefined) said.push(`petId ${shown(previous.petId)} -> ${shown(order.petId)}`)
  if (previous.quantity !== undefined) said.push(`quantity ${shown(previous.quantity)} -> ${shown(order.quantity)}`)
  if (previous.shipDate !== undefined) said.push(`shipDate ${shown(previous.shipDate)} -> ${shown(order.shipDate)}`)
  if (previous.metadata !== undefined) {
    const before: OrderMetadata = previous.metadata ?? {}
    const after: OrderMetadata = order.metadata ?? {}
    // Keys are of A-Z a-z 0-9 _ - . : only: printable as they are. Values may be long: not shown.
    for (const key of Object.keys(after)) if (!Object.hasOwn(before, key) || before[key] !== after[key]) said.push(`metadata ${key} set`)
    for (const key of Object.keys(before)) if (!Object.hasOwn(after, key)) said.push(`metadata ${key} removed`)
  }
  return said
}

export const ordersUpdate: Command = {
  name: ['orders', 'update'],
  synopsis: 'orders update ID [OPTIONS]',
  summary: "change a pending order's pet, quantity or ship date, or any order's metadata",
  positionals: [{ name: 'ID', describe: 'the id of the order to change' }],
  options: {
    'pet-id': { type: 'string' },
    quantity: { type: 'string' },
    'ship-date': { type: 'string' },
    'no-ship-date': { type: 'boolean' },
    meta: { type: 'string', multiple: true },
    'unset-meta': { type: 'string', multiple: true },
  },
  help: `Usage: ${PROGRAM} orders update ID [--pet-id N] [--quantity N] [--ship-date D | --no-ship-date]
                              [--meta KEY=VALUE]... [--unset-meta KEY]...

Changes the order ID as the API's updateOrder does, with the same order.updated event, and
says on one line what changed and the order's version after it. Only what the options name
changes. The pet, the quantity and the ship date change only while the order is pending: for
an order that has shipped or been cancelled the command refuses (exit 1) and changes nothing.
Metadata changes in any state, key by key: --meta sets a key (adding it or replacing its
value), --unset-meta removes one, and the order's other keys stay as they are. Values that are
the order's already are no change: when nothing changes, the command says so (exit 0), writes
nothing and the version stays. A bad option is refused before the database is opened (exit 2).

Options:
  --pet-id N           the pet ordered: an integer from 1 to ${INT64_MAX}
  --quantity N         the number of units: an integer from 1 to ${MAX_PLACE_QUANTITY}
  --ship-date D        when it is to ship: an RFC 3339 date-time with a timezone
                       (2026-12-01T10:00:00Z, 2026-12-01T11:00:00+01:00), stored in UTC
  --no-ship-date       remove the ship date
  --meta KEY=VALUE     set metadata KEY to VALUE (everything after the first "="); repeatable.
                       A key is 1 to 40 characters of A-Z a-z 0-9 _ - . : and a value at
                       most 500 characters; an order holds at most ${MAX_METADATA_KEYS} keys
  --unset-meta KEY     remove metadata KEY (a key the order does not have: no change); repeatable
  -h, --help           show this help
A key may be named once per command, by --meta or by --unset-meta.

Examples:
  ${PROGRAM} orders update 10 --quantity 3 --ship-date 2026-12-01T10:00:00Z
  ${PROGRAM} orders update 10 --meta customer=c-1042 --meta note="gift wrap" --unset-meta cart
  ${PROGRAM} orders update 9223372036854775807 --pet-id 9007199254740993 --no-ship-date

  order 10 updated to version 4: quantity 2 -> 3, shipDate none -> 2026-12-01T10:00:00.000Z
  order 10 updated to version 5: metadata customer set, metadata note set, metadata cart removed
  order 10 unchanged at version 5: it already has these values`,
  async run({ values, positionals }, io) {
    const id = orderId(positionals[0]!)
    const patch = updatePatch(values)
    // The CLI names no version (If-Match): its update applies to the order as it stands.
    const result: UpdateResult = await withStore(io, (store) => store.orders.update({ id, patch }))
    switch (result.outcome) {
      case 'updated':
        io.stdout.write(`order ${id} updated to version ${result.order.version}: ${changes(result.previous, result.order).join(', ')}\n`)
        return
      case 'unchanged':
        io.stdout.write(`order ${id} unchanged at version ${result.order.version}: it already has these values\n`)
        return
      case 'not_pending':
        throw new CommandError(
          `order ${id} has shipped or been cancelled; its pet, quantity and ship date change only while it is pending (its metadata changes in any state); nothing changed`,
        )
      case 'too_many_keys':
        throw new CommandError(`order ${id}: ${result.message}; nothing changed`)
      case 'not_found':
        throw new CommandError(`order ${id} does not exist`)
      case 'precondition_failed':
        throw new Error('an update without an expected version failed its precondition')
    }
  },
}
