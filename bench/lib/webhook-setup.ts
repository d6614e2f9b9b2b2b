/**
 * Child process: webhook endpoints for the bench, through the store as the API makes them. argv:
 *
 *   create <endpoints> <receiver base URL> <orders>   migrates, creates endpoints <base>/e/1…n (every
 *       event type), then imports orders 1…<orders> (one event each; 0: none) and counts the events
 *       after the endpoints' position, which is each one's expected deliveries
 *   remove                                            removes every endpoint (and its attempts)
 *
 * Tells `{type: 'done', after, events, last}` (positions as strings).
 */
import { randomBytes } from 'node:crypto'
import { loadDatabaseConfig } from '../../src/config.js'
import { ORDER_EVENT_TYPES } from '../../src/store/order-events.js'
import { openStore } from '../../src/store/open-store.js'
import { failed, tell } from './child-side.js'
import { orderRecords } from './dataset.js'

try {
  const [command, endpoints, base, orders] = process.argv.slice(2) as [string, string?, string?, string?]
  const store = await openStore(loadDatabaseConfig())
  try {
    await store.migrate()
    if (command === 'remove') {
      for (const endpoint of await store.webhooks.list()) await store.webhooks.remove(endpoint.id)
      tell({ type: 'done', after: '0', events: 0, last: '0' })
    } else if (command === 'create') {
      let after: bigint | undefined
      for (let n = 1; n <= Number(endpoints); n++) {
        const secret = `whsec_${randomBytes(32).toString('base64')}`
        const created = await store.webhooks.create({ url: `${base}/e/${n}`, eventTypes: [...ORDER_EVENT_TYPES], description: null, secret }, 10_000)
        if (created === 'too_many') throw new Error('too many webhook endpoints')
        if (after !== undefined && created.position !== after) throw new Error('the endpoints were created at different positions')
        after = created.position
      }
      if (after === undefined) throw new Error('no endpoint to create')
      if (Number(orders) > 0) await store.orders.import(orderRecords(Number(orders)))
      let events = 0
      let last = after
      for (;;) {
        const page = await store.events.read(last, 1000)
        if (page.count === 0) break
        events += page.count
        last = page.next
      }
      tell({ type: 'done', after: after.toString(), events, last: last.toString() })
    } else throw new Error(`unknown command "${command}"`)
  } finally {
    await store.close()
  }
  process.exit(0)
} catch (error) {
  failed(error)
}
