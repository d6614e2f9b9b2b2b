/**
 * Child process: webhook endpoints and events for the bench, through the store as the API and the
 * project's writers make them. argv:
 *
 *   create <healthy> <receiver base URL> <orders> [--trickling N] [--hanging N] [--failing N] [--orders-first]
 *       migrates, creates endpoints <base>/e/1…<healthy>, then <base>/t/…, /h/… and /f/… (every event
 *       type; see webhook-receiver.ts), then imports orders 1…<orders> (one event each; 0: none),
 *       and counts the events after the endpoints' position, which is each one's expected
 *       deliveries. --orders-first imports before creating: the endpoints start at the head.
 *   place <count> <per second>                        places `count` orders one at a time, evenly
 *       spaced at `per second` (store.orders.place, as the API does), counting the events they made
 *   remove                                            removes every endpoint (and its attempts)
 *
 * Tells `{type: 'done', after, events, last}` (positions as strings): `after` the endpoints'
 * position (create) or the head before the first place (place), `events` the events after it,
 * `last` the position of the last one.
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { loadDatabaseConfig } from '../../src/config.js'
import { ORDER_EVENT_TYPES } from '../../src/domain/order-events.js'
import { openStore } from '../../src/store/open-store.js'
import type { Store } from '../../src/store/store.js'
import { failed, tell } from './child-side.js'
import { orderRecords } from './dataset.js'

/** The receiver's path prefix of each kind of endpoint, in the order they are created. */
const KINDS = { healthy: 'e', trickling: 't', hanging: 'h', failing: 'f' } as const

interface Feed {
  after: bigint
  events: number
  last: bigint
}

/** The events after `after` (undefined: the start of the feed), and the last one's position. */
async function eventsAfter(store: Store, after: bigint | undefined): Promise<Feed> {
  let events = 0
  let last = after
  for (;;) {
    const page = await store.events.read(last, 1000)
    if (page.count === 0) break
    events += page.count
    last = page.next
  }
  return { after: after ?? 0n, events, last: last ?? 0n }
}

/** Creates `counts` endpoints of each kind at the head; their position, the same for all. */
async function createEndpoints(store: Store, base: string, counts: Record<keyof typeof KINDS, number>): Promise<bigint> {
  let position: bigint | undefined
  for (const [kind, prefix] of Object.entries(KINDS) as [keyof typeof KINDS, string][]) {
    for (let n = 1; n <= counts[kind]; n++) {
      const secret = `whsec_${randomBytes(32).toString('base64')}`
      const created = await store.webhooks.create({ url: `${base}/${prefix}/${n}`, eventTypes: [...ORDER_EVENT_TYPES], description: null, secret }, 10_000)
      if (created === 'too_many') throw new Error('too many webhook endpoints')
      if (position !== undefined && created.position !== position) throw new Error('the endpoints were created at different positions')
      position = created.position
    }
  }
  if (position === undefined) throw new Error('no endpoint to create')
  return position
}

async function create(store: Store, args: string[]): Promise<Feed> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { trickling: { type: 'string' }, hanging: { type: 'string' }, failing: { type: 'string' }, 'orders-first': { type: 'boolean' } },
  })
  const [healthy, base, orders] = positionals as [string, string, string]
  const counts = { healthy: Number(healthy), trickling: Number(values.trickling ?? 0), hanging: Number(values.hanging ?? 0), failing: Number(values.failing ?? 0) }
  const importOrders = async (): Promise<void> => {
    if (Number(orders) > 0) await store.orders.import(orderRecords(Number(orders)))
  }
  if (values['orders-first'] === true) await importOrders()
  const position = await createEndpoints(store, base, counts)
  if (values['orders-first'] !== true) await importOrders()
  return eventsAfter(store, position)
}

/** Open loop: the i-th place is due at i / perSecond seconds, whenever the one before ended. */
async function place(store: Store, count: number, perSecond: number): Promise<Feed> {
  const { last: head } = await eventsAfter(store, undefined)
  const started = performance.now()
  for (let i = 0; i < count; i++) {
    const due = started + (i * 1000) / perSecond
    if (due > performance.now()) await sleep(due - performance.now())
    const placed = await store.orders.place({ order: { petId: 1n, quantity: 1, shipDate: null } })
    if (placed.outcome !== 'placed') throw new Error(`place: ${placed.outcome}`)
  }
  return eventsAfter(store, head)
}

try {
  const [command, ...args] = process.argv.slice(2) as [string, ...string[]]
  const store = await openStore(loadDatabaseConfig())
  try {
    await store.migrate()
    let feed: Feed
    if (command === 'remove') {
      for (const endpoint of await store.webhooks.list()) await store.webhooks.remove(endpoint.id)
      feed = { after: 0n, events: 0, last: 0n }
    } else if (command === 'create') feed = await create(store, args)
    else if (command === 'place') feed = await place(store, Number(args[0]), Number(args[1]))
    else throw new Error(`unknown command "${command}"`)
    tell({ type: 'done', after: feed.after.toString(), events: feed.events, last: feed.last.toString() })
  } finally {
    await store.close()
  }
  process.exit(0)
} catch (error) {
  failed(error)
}
