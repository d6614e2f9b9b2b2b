import { bearer } from '../lib/client.js'
import {
  cartName,
  CHANNEL_RUN,
  CHANNELS,
  customerName,
  CUSTOMERS,
  isTagged,
  orderMetadata,
  orderRecord,
  PETS,
  TAGGED_EVERY,
} from '../lib/dataset.js'
import type { DownloadResult } from '../lib/downloader.js'
import { PROJECT_ENV, startServerChild } from '../lib/processes.js'
import { fmt, median, pairedRounds, roundRatios, verdict, type RoundRatios } from '../lib/report.js'
import type { OrderMetadata } from '../../src/domain/order-metadata.js'
import type { OrderRecord } from '../../src/domain/orders.js'
import { createDatabase, seed, type StoreContext } from './context.js'

/** Paired rounds of each first page against the unfiltered first page, as in comparison 7. */
const PAGE_ROUNDS = 15
const PAGE_WARMUP = 3
const PAGE = 100

const CUSTOMER = 42
const ONE_MONTH_FROM = '2026-06-01T00:00:00.000Z'
const ONE_MONTH_TO = '2026-07-01T00:00:00.000Z'
const ONE_MONTH = `shipDateFrom=${ONE_MONTH_FROM.replace('.000', '')}&shipDateTo=${ONE_MONTH_TO.replace('.000', '')}`

interface Filter {
  name: string
  query: string
  /** Whether order `record` (with `metadata`) is in the filter's pages: what the server must answer. */
  matches: (record: OrderRecord, metadata: OrderMetadata | undefined) => boolean
  /** Alone: only metadata filters (the issue's target); else ANDed with the others'. */
  alone: boolean
}

const notCancelled = (record: OrderRecord): boolean => record.status !== 'cancelled'

/** The filters measured; `last` is the last tagged order of the data set (its cart is one order's). */
function filters(last: number): Filter[] {
  const metadataFilter = (key: string, value: string): Filter['matches'] => (record, metadata) => notCancelled(record) && metadata?.[key] === value
  const customer = customerName(CUSTOMER)
  return [
    { name: `metadata[channel]=${CHANNELS[0]} (1 in 4 tagged orders, in runs)`, query: `metadata[channel]=${CHANNELS[0]}`, matches: metadataFilter('channel', CHANNELS[0]), alone: true },
    { name: `metadata[customer]=${customer} (~1 in ${fmt.count(CUSTOMERS)}, spread over all ids)`, query: `metadata[customer]=${customer}`, matches: metadataFilter('customer', customer), alone: true },
    { name: 'metadata[cart]=<the last tagged order’s> (one order, at the end)', query: `metadata[cart]=${cartName(last)}`, matches: metadataFilter('cart', cartName(last)), alone: true },
    { name: 'metadata[channel]=<no order’s> (an empty page)', query: 'metadata[channel]=fax', matches: () => false, alone: true },
    {
      name: `metadata[channel]=${CHANNELS[3]} + metadata[customer]=${customer} (1 in 4 of the customer’s)`,
      query: `metadata[channel]=${CHANNELS[3]}&metadata[customer]=${customer}`,
      matches: (record, metadata) => notCancelled(record) && metadata?.channel === CHANNELS[3] && metadata.customer === customer,
      alone: true,
    },
    {
      name: `metadata[channel]=${CHANNELS[0]} + status=shipped`,
      query: `metadata[channel]=${CHANNELS[0]}&status=shipped`,
      matches: (record, metadata) => record.status === 'shipped' && metadata?.channel === CHANNELS[0],
      alone: false,
    },
    {
      name: `metadata[channel]=${CHANNELS[1]} + one-month shipDate range`,
      query: `metadata[channel]=${CHANNELS[1]}&${ONE_MONTH}`,
      matches: (record, metadata) =>
        notCancelled(record) && metadata?.channel === CHANNELS[1] && record.shipDate !== null && record.shipDate >= ONE_MONTH_FROM && record.shipDate < ONE_MONTH_TO,
      alone: false,
    },
    {
      name: `metadata[customer]=${customer} + petId`,
      // A pet among the customer's orders' pets, read from the data set below.
      query: '',
      matches: () => false,
      alone: false,
    },
  ]
}

/**
 * Comparison 13, the metadata filter (`GET /v2/store/orders?metadata[KEY]=VALUE`), on a data set of
 * its own: BENCH_ORDERS orders (1,000,000 by default) of which 1 in 10 carry metadata (100,000), as
 * lib/dataset.ts makes them, imported with their metadata through the store. For each filter, its
 * first page of 100 is timed in paired rounds against the unfiltered first page, over one
 * keep-alive connection from the downloader process, as in comparison 7: target ≤ 5× for the worst
 * filter of metadata alone (one key, two keys ANDed) and for the worst ANDed with other filters.
 * Before the rounds, each first page is read once and checked against the data set: the orders it
 * must have, in order, each with the metadata asked for, and `nextCursor` exactly when more match.
 */
export async function metadataPages(context: StoreContext): Promise<void> {
  const { downloader } = context
  const section = context.report.section('13. v2 pages filtered by metadata', context.label, 'unfiltered first page')
  const database = await createDatabase(context.kind)
  try {
    console.log(`  importing ${fmt.count(context.orders)} orders, 1 in ${TAGGED_EVERY} with metadata, into ${context.label} …`)
    const seeded = await seed(database, context.orders, { pets: PETS, key: true, metadata: true })
    console.log(`  imported in ${seeded.importSeconds.toFixed(1)} s`)
    const tagged = await database.count('SELECT count(DISTINCT order_id) FROM order_metadata')

    // Expected first pages, from the data set itself.
    let last = 0
    for (let id = context.orders; id >= 1 && last === 0; id--) if (isTagged(id)) last = id
    const cases = filters(last)
    const petCase = cases.at(-1)!
    const customerPet = firstPetOf(context.orders, (metadata) => metadata.customer === customerName(CUSTOMER))
    petCase.query = `metadata[customer]=${customerName(CUSTOMER)}&petId=${customerPet}`
    petCase.matches = (record, metadata) => notCancelled(record) && metadata?.customer === customerName(CUSTOMER) && record.petId === BigInt(customerPet)
    const expected = firstPages(context.orders, cases)

    const server = await startServerChild('project server (metadata pages)', 'lib/project-server.ts', { DATABASE_URL: database.url, ...PROJECT_ENV })
    try {
      const headers = bearer(seeded.secret!)
      const get = (query: string): Promise<DownloadResult> => downloader.request(`${server.url}/v2/store/orders?limit=${PAGE}${query === '' ? '' : `&${query}`}`, { headers })
      for (let i = 0; i < cases.length; i++) await checkPage(server.url, seeded.secret!, cases[i]!, expected[i]!)
      const results: { filter: Filter; ms: number; baselineMs: number; ratio: RoundRatios; bytes: number; orders: number }[] = []
      for (let i = 0; i < cases.length; i++) {
        const filter = cases[i]!
        const query = encodeQuery(filter.query)
        for (let w = 0; w < PAGE_WARMUP; w++) await get(query)
        let bytes = 0
        const rounds = await pairedRounds(
          PAGE_ROUNDS,
          async () => (await get('')).ms,
          async () => {
            const page = await get(query)
            bytes = page.bytes
            return page.ms
          },
        )
        results.push({ filter, ms: median(rounds.project), baselineMs: median(rounds.baseline), ratio: roundRatios(rounds.project, rounds.baseline), bytes, orders: expected[i]!.ids.length })
      }
      for (const result of results) {
        section.rows.push({
          measure: `${result.filter.name}: first page (${fmt.count(result.orders)} order${result.orders === 1 ? '' : 's'})`,
          project: fmt.ms(result.ms),
          baseline: fmt.ms(result.baselineMs),
          ratio: fmt.rounds(result.ratio),
          result: 'info',
        })
      }
      for (const alone of [true, false]) {
        const group = results.filter((result) => result.filter.alone === alone)
        const worst = group.reduce((a, b) => (b.ratio.median > a.ratio.median ? b : a))
        section.rows.push({
          measure: `worst first page, ${alone ? 'metadata filters alone' : 'ANDed with other filters'}: ${worst.filter.name}`,
          project: fmt.ms(worst.ms),
          baseline: fmt.ms(worst.baselineMs),
          ratio: fmt.rounds(worst.ratio),
          target: '≤ 5×',
          result: verdict(worst.ratio.median <= 5),
        })
      }
      section.notes.push(
        `${fmt.count(context.orders)} orders, ${fmt.count(tagged)} of them with metadata (ids ≡ 4 mod 10; keys customer, channel, cart; imported in ${seeded.importSeconds.toFixed(1)} s); pages of ${PAGE} over one keep-alive connection; ${PAGE_ROUNDS} paired rounds a page after ${PAGE_WARMUP} warm-up requests; ratios: each page's time over the unfiltered first page's in the same round (median, range in brackets).`,
        `Queries: ${results.map((result) => `\`${result.filter.query}\``).join(', ')}. Each first page was read once before the rounds and checked against the data set (its orders in order, their metadata, nextCursor exactly when more match). Channels come in runs of ${fmt.count(CHANNEL_RUN * TAGGED_EVERY)} ids, so a channel's first page is near the start; a customer's orders are every ${fmt.count(CUSTOMERS * TAGGED_EVERY)}th id.`,
      )
    } finally {
      await server.child.stop()
    }
  } finally {
    await database.drop()
  }
}

/** Query text with each `metadata[KEY]` as the client library sends it (brackets percent-encoded). */
function encodeQuery(query: string): string {
  return query.replace(/metadata\[([^\]]+)\]/g, (_, key: string) => `metadata%5B${encodeURIComponent(key)}%5D`)
}

interface ExpectedPage {
  /** The first page's order ids, ascending, as decimal text. */
  ids: string[]
  /** Whether more orders match than the page holds. */
  more: boolean
}

/** Each filter's first page as the data set says it must be. */
function firstPages(orders: number, cases: Filter[]): ExpectedPage[] {
  const pages: ExpectedPage[] = cases.map(() => ({ ids: [], more: false }))
  for (let id = 1; id <= orders; id++) {
    const record = orderRecord(id)
    const metadata = orderMetadata(id)
    cases.forEach((filter, i) => {
      const page = pages[i]!
      if (page.more || !filter.matches(record, metadata)) return
      if (page.ids.length < PAGE) page.ids.push(String(id))
      else page.more = true
    })
  }
  return pages
}

/** The pet of the first tagged order whose metadata `which` picks. */
function firstPetOf(orders: number, which: (metadata: OrderMetadata) => boolean): bigint {
  for (let id = 1; id <= orders; id++) {
    const metadata = orderMetadata(id)
    const record = orderRecord(id)
    if (metadata !== undefined && which(metadata) && record.petId !== null && record.status !== 'cancelled') return record.petId
  }
  throw new Error('no tagged order of that kind in the data set')
}

/** Reads the first page of `filter` once, untimed, and checks it against `expected`. */
async function checkPage(origin: string, secret: string, filter: Filter, expected: ExpectedPage): Promise<void> {
  const response = await fetch(`${origin}/v2/store/orders?limit=${PAGE}${filter.query === '' ? '' : `&${encodeQuery(filter.query)}`}`, { headers: bearer(secret) })
  const text = await response.text()
  if (response.status !== 200) throw new Error(`${filter.query}: status ${response.status}: ${text.slice(0, 300)}`)
  // Ids as the JSON text has them (never through a number).
  const ids = [...text.matchAll(/\{"id":(\d+),/g)].map((match) => match[1]!)
  const page = JSON.parse(text) as { data: { metadata?: OrderMetadata }[]; nextCursor?: string }
  const wrong = (what: string): Error => new Error(`${filter.query}: ${what}`)
  if (ids.length !== page.data.length) throw wrong(`${page.data.length} orders but ${ids.length} ids read`)
  if (ids.join() !== expected.ids.join()) throw wrong(`orders ${ids.slice(0, 5).join(', ')}… (${ids.length}), expected ${expected.ids.slice(0, 5).join(', ')}… (${expected.ids.length})`)
  if ((page.nextCursor !== undefined) !== expected.more) throw wrong(`nextCursor ${page.nextCursor === undefined ? 'absent' : 'present'}, expected ${expected.more ? 'present' : 'absent'}`)
  for (const [key, value] of new URLSearchParams(filter.query)) {
    const match = /^metadata\[(.+)\]$/.exec(key)
    if (match === null) continue
    if (page.data.some((order) => order.metadata?.[match[1]!] !== value)) throw wrong(`an order without metadata ${match[1]} = ${value}`)
  }
}
