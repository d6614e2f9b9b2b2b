import { MAX_DEMO_ORDERS } from '../../demo/demo-data.js'
import { DEMO_ORDERS } from '../../demo/prepare-demo.js'
import { seedDemoData, type SeedProgress, type SeedResult } from '../../demo/seed-demo-data.js'
import { INT64_MAX, parseInt64 } from '../../domain/int64.js'
import { ImportConflictError } from '../../store/store.js'
import { CommandError, oneLine, PROGRAM, stringOption, UsageError, withStore, type Command } from '../command.js'
import { formatCount, percent, Progress } from '../progress.js'

/** Seeding progress as a line on the terminal. */
export function seedProgress(progress: Progress, orders: number): SeedProgress {
  return {
    orders: (count) => progress.update(`seeding: ${percent(count, orders)} ${formatCount(count)} of ${formatCount(orders)} orders`),
    pets: (count) => progress.update(`seeding: ${formatCount(count)} pets…`, true),
  }
}

function integerOption(text: string | undefined, name: string, min: number, max: number, fallback?: number): number {
  if (text === undefined) {
    if (fallback === undefined) throw new UsageError(`missing --${name}`)
    return fallback
  }
  if (!/^[0-9]{1,16}$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`)
  }
  return Number(text)
}

export const seed: Command = {
  name: ['seed'],
  synopsis: 'seed --orders N',
  summary: 'generate realistic demo orders and their pets',
  options: { orders: { type: 'string' }, seed: { type: 'string' }, 'first-id': { type: 'string' } },
  help: `Usage: ${PROGRAM} seed --orders N [--seed S] [--first-id ID]

Generates N demo orders and the pets they refer to (one pet for every four orders, at most
100,000) and writes them, upserting by id: orders ID to ID+N-1, pets 1 to the pet count. About
60% of the orders are pending (shipping within three weeks), 30% shipped (in the last two
months; complete once a few days old) and 10% cancelled; quantities are 1 to 10.

The same --seed gives the same orders (ship dates are counted from the start of the current UTC
day), so running the same seed again changes nothing. Orders already shipped or cancelled in the
database are never moved back: if the generated orders would do that, nothing is written — pick
other ids with --first-id. So on a database that already has orders ('serve --demo' seeds ids 1
to ${DEMO_ORDERS} with seed 1, and some get cancelled as you try the API), seed past them:
'seed --orders 1000 --first-id ${DEMO_ORDERS + 1}'. Do not run it against data you care about: it replaces the pets and
pending orders with those ids.

Shows progress on stderr when stderr is a terminal. A million orders take about a minute and
no more memory than a thousand.

Options:
  --orders N      how many orders, 1 to ${formatCount(MAX_DEMO_ORDERS)} (required)
  --seed S        random seed, 0 to 4294967295 (default 1)
  --first-id ID   id of the first order (default 1)
  -h, --help      show this help

Examples:
  ${PROGRAM} seed --orders 1000
  ${PROGRAM} seed --orders 1000000 --seed 42
  ${PROGRAM} seed --orders 500 --first-id 1000001
  ${PROGRAM} seed --orders 1000 --first-id ${DEMO_ORDERS + 1}   # beside the demo orders`,
  async run({ values }, io) {
    const orders = integerOption(stringOption(values, 'orders'), 'orders', 1, MAX_DEMO_ORDERS)
    const seedValue = integerOption(stringOption(values, 'seed'), 'seed', 0, 4_294_967_295, 1)
    const firstIdText = stringOption(values, 'first-id')
    const firstOrderId = firstIdText === undefined ? 1n : parseInt64(firstIdText)
    if (firstOrderId === undefined || firstOrderId < 1n || firstOrderId + BigInt(orders) - 1n > INT64_MAX) {
      throw new UsageError(`--first-id must be an integer from 1 to ${INT64_MAX - BigInt(orders) + 1n}, got ${JSON.stringify(firstIdText)}`)
    }
    const progress = new Progress(io.stderr)
    progress.update('seeding…', true)
    let result: SeedResult
    try {
      result = await withStore(io, (store) => seedDemoData(store, { orders, seed: seedValue, firstOrderId }, seedProgress(progress, orders)), { createDatabase: true })
    } catch (error) {
      if (error instanceof ImportConflictError) {
        throw new CommandError(`${oneLine(error.message)}; nothing was seeded (use --first-id to seed other ids)`)
      }
      throw error
    } finally {
      progress.clear()
    }
    const lastId = firstOrderId + BigInt(orders) - 1n
    io.stdout.write(
      `seeded ${result.orders} orders (ids ${firstOrderId} to ${lastId}) and ${result.pets} pets (ids 1 to ${result.pets}) with seed ${seedValue}\n`,
    )
  },
}
