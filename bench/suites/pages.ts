import { bearer } from '../lib/client.js'
import type { DownloadResult } from '../lib/downloader.js'
import { PETS } from '../lib/dataset.js'
import { PROJECT_ENV, startServerChild, type RunningChild } from '../lib/processes.js'
import { fmt, median, pairedRounds, roundRatios, verdict, type RoundRatios } from '../lib/report.js'
import { bigDataset, bumpVersion, type StoreContext } from './context.js'

/** Paired rounds of each page against the unfiltered first page. */
const PAGE_ROUNDS = 15
const PAGE_WARMUP = 3
/** Paired rounds of the walk over every page against one v1 full list (cache miss). */
const WALK_ROUNDS = 5
const PAGE = 100
const WALK_PAGE = 1000
/** Every order of a page has this text once: its start (`"id"` occurs nowhere else in an order). */
const ORDER_MARKER = '{"id":'

/** A pet of the data set (each has about 1 in PETS orders), and the ship dates' year (lib/dataset.ts). */
const PET = 1 + Math.floor(PETS / 2)
const ONE_DAY = 'shipDateFrom=2026-06-01T00:00:00Z&shipDateTo=2026-06-02T00:00:00Z'
const ONE_MONTH = 'shipDateFrom=2026-06-01T00:00:00Z&shipDateTo=2026-07-01T00:00:00Z'

/** The filters measured, each as a query string (the mid-list cursor is added once known). */
const FILTERS: { name: string; query: string }[] = [
  { name: 'none', query: '' },
  { name: 'mid-list cursor', query: '' },
  { name: 'status=cancelled', query: 'status=cancelled' },
  { name: 'petId', query: `petId=${PET}` },
  { name: 'complete=true', query: 'complete=true' },
  { name: 'one-day shipDate range', query: ONE_DAY },
  { name: 'one-month shipDate range', query: ONE_MONTH },
  { name: 'status=cancelled + one month', query: `status=cancelled&${ONE_MONTH}` },
  { name: 'petId + complete=true', query: `petId=${PET}&complete=true` },
  { name: 'all statuses + petId + one month', query: `status=pending,shipped,cancelled&petId=${PET}&${ONE_MONTH}` },
  { name: 'status=shipped + complete=false + one day', query: `status=shipped&complete=false&${ONE_DAY}` },
]

/**
 * v2 pages (GET /v2/store/orders) on the big data set, over HTTP from the downloader process (one
 * keep-alive connection):
 * - for each filter, the first and the second page of 100, each timed in paired rounds against the
 *   unfiltered first page; target: the worst ratio ≤ 5× (every filter is read from an index);
 * - walking every order in pages of 1000, following the `Link: rel="next"` header, against one v1
 *   full list that is a cache miss (an order is cancelled first), both read to the last byte;
 *   target ≤ 5× (each page is one statement, read when it is asked for);
 * - the peak RSS of the server that serves the pages and walks (a server of its own: the v1 lists
 *   run on another, whose list cache would otherwise set the peak) against its RSS when idle.
 */
export async function pages(context: StoreContext): Promise<void> {
  const big = await bigDataset(context)
  const { downloader } = context
  const env = { DATABASE_URL: big.database.url, ...PROJECT_ENV }
  const headers = bearer(big.secret)
  const section = context.report.section('7. v2 pages', context.label, 'unfiltered first page / v1 list')
  section.notes.push(
    `${fmt.count(big.orders)} orders; pages of ${PAGE} over one keep-alive connection; ${PAGE_ROUNDS} paired rounds a page after ${PAGE_WARMUP} warm-up requests.`,
  )

  const v2 = await startServerChild('project server (v2 pages)', 'lib/project-server.ts', env)
  const servers: { v1?: RunningChild } = {}
  try {
    const idleRss = v2.child.memory().rss
    const get = (query: string): Promise<DownloadResult> => downloader.request(`${v2.url}/v2/store/orders?${query}`, { headers })

    const v1 = (servers.v1 = await startServerChild('project server (v1 list)', 'lib/project-server.ts', env))
    // Untimed first, on each side, as on a server that has been serving: a walk, which counts the
    // orders (every one not cancelled must be in it) and takes the mid-list cursor, and a v1 list that
    // is a cache miss. The timed walks then read bytes, as the v1 lists do.
    const midPage = Math.floor(big.orders / WALK_PAGE / 2)
    const walk = await downloader.walk(`${v2.url}/v2/store/orders?limit=${WALK_PAGE}`, { headers, param: 'cursor', itemMarker: ORDER_MARKER, cursorAtPage: midPage })
    const listed = await big.database.count(`SELECT count(*) FROM orders WHERE status <> 'cancelled'`)
    if (walk.items !== listed) throw new Error(`a walk read ${walk.items} orders of the ${listed} not cancelled`)
    if (walk.cursorAt === undefined) throw new Error('the walk had too few pages for a mid-list cursor')
    FILTERS[1]!.query = `cursor=${walk.cursorAt}`
    await bumpVersion(context, v1.url)
    await downloader.request(`${v1.url}/v1/store/orders`, { headers })
    const walks = await pairedRounds(
      WALK_ROUNDS,
      async () => {
        await bumpVersion(context, v1.url)
        const list = await downloader.request(`${v1.url}/v1/store/orders`, { headers })
        return { ms: list.ms, bytes: list.bytes }
      },
      () => downloader.walk(`${v2.url}/v2/store/orders?limit=${WALK_PAGE}`, { headers, param: 'cursor' }),
    )

    // Each filter's first page and, when there is one, its second: its cursor is taken once.
    const cases: { name: string; query: string }[] = []
    for (const filter of FILTERS) {
      const first = `limit=${PAGE}${filter.query === '' ? '' : `&${filter.query}`}`
      cases.push({ name: `${filter.name}: first page`, query: first })
      const cursor = nextCursor(await get(first))
      if (cursor === undefined) {
        section.notes.push(`${filter.name}: a single page at this size, no second page to time.`)
        continue
      }
      const rest = filter.query.replace(/(^|&)cursor=[^&]*/, '')
      cases.push({ name: `${filter.name}: second page`, query: `limit=${PAGE}${rest === '' ? '' : `&${rest.replace(/^&/, '')}`}&cursor=${cursor}` })
    }
    const baselineQuery = cases[0]!.query
    const results: { name: string; ms: number; baselineMs: number; ratio: RoundRatios; bytes: number }[] = []
    for (const { name, query } of cases) {
      for (let i = 0; i < PAGE_WARMUP; i++) await get(query)
      let bytes = 0
      const rounds = await pairedRounds(
        PAGE_ROUNDS,
        async () => (await get(baselineQuery)).ms,
        async () => {
          const page = await get(query)
          bytes = page.bytes
          return page.ms
        },
      )
      results.push({ name, ms: median(rounds.project), baselineMs: median(rounds.baseline), ratio: roundRatios(rounds.project, rounds.baseline), bytes })
    }
    // Each timed walk read every page the counted one did, less the orders the v1 rounds cancelled.
    const short = walks.project.find((w) => w.pages !== walk.pages || w.bytes < walk.bytes - WALK_ROUNDS * 200)
    if (short !== undefined) throw new Error(`a timed walk read ${short.pages} pages, ${short.bytes} bytes: not the counted one's ${walk.pages}, ${walk.bytes}`)
    const peakRss = v2.child.memory().peakRss

    const worst = results.reduce((a, b) => (b.ratio.median > a.ratio.median ? b : a))
    for (const result of results) {
      section.rows.push({
        measure: result.name,
        project: fmt.ms(result.ms),
        baseline: fmt.ms(result.baselineMs),
        ratio: fmt.rounds(result.ratio),
        result: 'info',
      })
    }
    section.rows.push({
      measure: `worst page: ${worst.name}`,
      project: fmt.ms(worst.ms),
      baseline: fmt.ms(worst.baselineMs),
      ratio: fmt.rounds(worst.ratio),
      target: '≤ 5×',
      result: verdict(worst.ratio.median <= 5),
    })

    const walkRatio = roundRatios(
      walks.project.map((walk) => walk.ms),
      walks.baseline.map((list) => list.ms),
    )
    section.rows.push(
      {
        measure: `walk every order, pages of ${WALK_PAGE} (${WALK_ROUNDS} paired rounds)`,
        project: fmt.ms(median(walks.project.map((w) => w.ms))),
        baseline: fmt.ms(median(walks.baseline.map((list) => list.ms))),
        ratio: fmt.rounds(walkRatio),
        target: '≤ 5×',
        result: verdict(walkRatio.median <= 5),
      },
      {
        measure: 'walk: orders (counted by the untimed walk: every one not cancelled), pages and bytes on the wire',
        project: `${fmt.count(walk.items)} orders, ${fmt.count(walk.pages)} pages, ${fmt.mb(walk.bytes)}`,
        baseline: fmt.mb(walks.baseline[0]!.bytes),
        result: 'info',
      },
      {
        measure: 'v2 server peak RSS (VmHWM) over the walks and pages, vs idle',
        project: fmt.mib(peakRss),
        baseline: `${fmt.mib(idleRss)} idle`,
        ratio: `+${fmt.mib(peakRss - idleRss)}`,
        result: 'info',
      },
    )
    section.notes.push(
      `Ratios: each page's time over the unfiltered first page's in the same round (median of the rounds, range in brackets). Pet ${PET}; ship dates ${ONE_DAY.replace('&', ' to ')} and ${ONE_MONTH.replace('&', ' to ')}.`,
      `The walk runs in the downloader process on one keep-alive connection: each page read to its last byte and not parsed (its nextCursor read from its end), the next page asked with cursor=<nextCursor> (the URL its Link header names) until a page has none. Before the rounds, untimed: one walk, which counts the orders in the pages' bytes and gives the mid-list cursor, and one v1 list (cache miss), so that both servers are warm, as in service. Each v1 list follows a cancel through the API, so it is a cache miss streamed from the database (the walk then sees one order fewer). Per round (ms): walk ${walks.project.map((w) => w.ms.toFixed(0)).join(', ')}; v1 list ${walks.baseline.map((l) => l.ms.toFixed(0)).join(', ')}.`,
      `The v2 server is a server of its own, which no v1 list reaches: its peak is the pages' and the walks' alone.`,
    )
  } finally {
    await servers.v1?.child.stop()
    await v2.child.stop()
  }
}

/** The `cursor` of a response's `Link: <…>; rel="next"`, absent on the last page. */
function nextCursor(response: DownloadResult): string | undefined {
  const link = response.headers.link
  if (link === undefined) return undefined
  const match = /^<([^>]+)>; rel="next"$/.exec(Array.isArray(link) ? link[0]! : link)
  if (match === null) throw new Error(`unexpected Link header: ${String(link)}`)
  return new URL(match[1]!, 'http://x').searchParams.get('cursor') ?? undefined
}
