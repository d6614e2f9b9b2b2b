import { once } from 'node:events'
import { createWriteStream, existsSync, mkdirSync, renameSync } from 'node:fs'
import { join } from 'node:path'
import { orderRecord } from './dataset.js'
import { WORK_DIR } from './paths.js'

/**
 * The bench's data set (lib/dataset.ts) as the file a user imports: one JSON array of
 * `{id, petId, quantity, shipDate, status, complete}`, ids and pet ids as JSON integers, absent
 * fields left out, no whitespace. Written once into .bench/work (1,000,000 orders: 112 MB) and
 * reused; the content depends only on `orders`.
 */
export async function ordersFile(orders: number): Promise<string> {
  mkdirSync(WORK_DIR, { recursive: true })
  const path = join(WORK_DIR, `orders-${orders}.json`)
  if (existsSync(path)) return path
  const partial = `${path}.partial`
  const out = createWriteStream(partial)
  out.write('[')
  for (let id = 1; id <= orders; id++) {
    const order = orderRecord(id)
    let text = `{"id":${order.id}`
    if (order.petId !== null) text += `,"petId":${order.petId}`
    if (order.quantity !== null) text += `,"quantity":${order.quantity}`
    if (order.shipDate !== null) text += `,"shipDate":"${order.shipDate}"`
    text += `,"status":"${order.status}","complete":${order.complete}}`
    if (!out.write(id === 1 ? text : `,${text}`)) await once(out, 'drain')
  }
  out.end(']')
  await once(out, 'finish')
  renameSync(partial, path)
  return path
}
