/**
 * Where a drain of the order event feed spends its time, without HTTP: on the database DATABASE_URL
 * names (seeded with events, e.g. by bench/profile-import.ts), every event read through the store's
 * own store.events.read in pages of 1,000 from the oldest, against one v1 list read through
 * store.orders.streamJson (what a v1 cache miss reads from the database), in paired rounds. The gap
 * between these figures and comparison 8's drain over HTTP is the HTTP side of the pages.
 *
 *   DATABASE_URL=sqlite:/tmp/x.db node --import tsx bench/profile-drain.ts [rounds]
 */
import { loadDatabaseConfig } from '../src/config.js'
import { openStore } from '../src/store/open-store.js'
import { median } from './lib/report.js'

const PAGE = 1000
const rounds = Number(process.argv[2] ?? 3)
const store = await openStore(loadDatabaseConfig())
try {
  await store.migrate()
  const drains: { ms: number; pages: number; events: number; bytes: number; slowestMs: number }[] = []
  const lists: { ms: number; bytes: number }[] = []
  for (let round = 0; round < rounds; round++) {
    const drain = async (): Promise<void> => {
      const started = performance.now()
      let after: bigint | undefined
      let pages = 0
      let events = 0
      let bytes = 0
      let slowestMs = 0
      for (;;) {
        const pageStarted = performance.now()
        const page = await store.events.read(after, PAGE)
        slowestMs = Math.max(slowestMs, performance.now() - pageStarted)
        pages++
        events += page.count
        bytes += page.json.length
        after = page.next
        if (page.count === 0) break
      }
      drains.push({ ms: performance.now() - started, pages, events, bytes, slowestMs })
    }
    const list = async (): Promise<void> => {
      const started = performance.now()
      let bytes = 0
      for await (const chunk of store.orders.streamJson()) bytes += chunk.length
      lists.push({ ms: performance.now() - started, bytes })
    }
    if (round % 2 === 0) {
      await list()
      await drain()
    } else {
      await drain()
      await list()
    }
  }
  const d = drains.at(-1)!
  const drainMs = median(drains.map((x) => x.ms))
  const listMs = median(lists.map((x) => x.ms))
  console.log(`${store.kind}: store.events.read, pages of ${PAGE}: ${d.events.toLocaleString('en-US')} events, ${d.pages} pages, ${(d.bytes / 1e6).toFixed(1)} MB`)
  console.log(`  drain ${drains.map((x) => x.ms.toFixed(0)).join(', ')} ms (median ${drainMs.toFixed(0)}; ${(drainMs / d.pages).toFixed(2)} ms a page; slowest page ${d.slowestMs.toFixed(1)} ms)`)
  console.log(`  v1 list through streamJson ${lists.map((x) => x.ms.toFixed(0)).join(', ')} ms (median ${listMs.toFixed(0)}; ${(lists.at(-1)!.bytes / 1e6).toFixed(1)} MB)`)
  console.log(`  ratio of medians ${(drainMs / listMs).toFixed(2)}×`)
} finally {
  await store.close()
}
