import type { OrderV2Record } from '../domain/orders.js'

/**
 * An order's v2 JSON made in JavaScript, for an order a store has just written or changed (a place,
 * an update: its event), rather than asked of the database: the text both stores' ORDER_V2_JSON
 * build, field for field, under the same conditions, which is what the OrderV2 serializer writes.
 * test/v2-page-json.test.ts holds them equal. Metadata is its stored text (JSON.stringify's).
 */
export function orderV2Json(order: OrderV2Record): string {
  let json = `{"id":${order.id},"complete":${order.complete},"status":"${order.status}","version":${order.version}`
  if (order.petId !== null) json += `,"petId":${order.petId}`
  if (order.quantity !== null) json += `,"quantity":${order.quantity}`
  if (order.shipDate !== null) json += `,"shipDate":${JSON.stringify(order.shipDate)}`
  if (order.status === 'shipped' && order.shippedAt !== null) json += `,"shippedAt":${JSON.stringify(order.shippedAt)}`
  if (order.status === 'shipped' && order.complete && order.completedAt !== null) json += `,"completedAt":${JSON.stringify(order.completedAt)}`
  if (order.status === 'cancelled' && order.cancelledAt !== null) json += `,"cancelledAt":${JSON.stringify(order.cancelledAt)}`
  if (order.status === 'cancelled' && order.cancellationReason !== null) {
    json += `,"cancellationReason":${JSON.stringify(order.cancellationReason)}`
  }
  if (order.metadata !== null) json += `,"metadata":${JSON.stringify(order.metadata)}`
  return `${json}}`
}
