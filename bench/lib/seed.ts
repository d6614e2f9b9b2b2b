/**
 * Child process: migrates the database of DATABASE_URL and imports the bench's data set through the
 * store's own importOrders (one transaction, records from a lazy generator), timing the import and
 * sampling this process's RSS every 10,000 orders. Then imports the pets and, when asked, creates an
 * API key with every scope. argv: <orders> <pets> <create-key: 0|1> [<metadata: 0|1>] (1: the metadata
 * data set's orders, lib/dataset.ts).
 */
import { loadDatabaseConfig } from '../../src/config.js'
import { generateApiKey, SCOPES } from '../../src/domain/api-keys.js'
import { openStore } from '../../src/store/open-store.js'
import { failed, tell } from './child-side.js'
import { orderRecords, petRecords } from './dataset.js'
import { memoryOf } from './proc.js'

export interface SeedResult {
  type: 'seeded'
  orders: number
  importSeconds: number
  /** CPU time (user + system) of this process during the import: all of SQLite's work, the client's side of PostgreSQL's. */
  importCpuSeconds: number
  /** [orders imported so far, RSS in bytes] every 10,000 orders. */
  rssSamples: [number, number][]
  rssBefore: number
  peakRss: number
  secret: string | null
}

try {
  const [orders, pets, createKey, metadata = 0] = process.argv.slice(2).map(Number) as [number, number, number, number?]
  const store = await openStore(loadDatabaseConfig())
  try {
    await store.migrate()
    const rssSamples: [number, number][] = []
    const rssBefore = process.memoryUsage.rss()
    const started = process.hrtime.bigint()
    const cpuBefore = process.cpuUsage()
    const imported = await store.orders.import(orderRecords(orders, { metadata: metadata === 1 }), (count) => {
      rssSamples.push([count, process.memoryUsage.rss()])
    })
    const importSeconds = Number(process.hrtime.bigint() - started) / 1e9
    const cpu = process.cpuUsage(cpuBefore)
    const importCpuSeconds = (cpu.user + cpu.system) / 1e6
    const { peakRss } = memoryOf('self')
    if (imported !== orders) throw new Error(`imported ${imported} orders, expected ${orders}`)
    if (pets > 0) await store.pets.import(petRecords(pets))
    let secret: string | null = null
    if (createKey === 1) {
      const key = generateApiKey()
      await store.apiKeys.create({ name: 'bench', hash: key.hash, displayPrefix: key.displayPrefix, scopes: [...SCOPES], expiresAt: null })
      secret = key.secret
    }
    const result: SeedResult = { type: 'seeded', orders: imported, importSeconds, importCpuSeconds, rssSamples, rssBefore, peakRss, secret }
    tell({ ...result })
  } finally {
    await store.close()
  }
  process.exit(0)
} catch (error) {
  failed(error)
}
