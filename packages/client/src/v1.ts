// v1: `createClient`, for a server URL ending in `/v1`.
import type { Order } from './api-types.js'
import { decodeOrders } from './decode.js'
import type { operations } from './openapi-types.js'
import { caller, readJson, type ClientOptions, type RequestOptions } from './transport.js'

export interface PetstoreClient {
  /** Every order that is not cancelled, in ascending id order (GET /store/orders). */
  listOrders(options?: RequestOptions): Promise<Order[]>
  /**
   * Cancels a pending order (DELETE /store/orders/{orderId}). Resolves once the cancellation is
   * durable. A shipped order rejects with 409 `order_already_shipped`; an unknown or already
   * cancelled one with 404 `order_not_found`. The id is a bigint or its decimal string.
   */
  cancelOrder(id: bigint | string, options?: RequestOptions): Promise<void>
}

type ListOrdersResponse = operations['listOrders']['responses'][200]['content']['application/json']
type CancelOrderId = operations['cancelOrder']['parameters']['path']['orderId']

export function createClient(options: ClientOptions): PetstoreClient {
  const call = caller(options, 'v1')

  return {
    async listOrders({ signal } = {}) {
      const response = await call('GET', 'store/orders', signal)
      const orders: ListOrdersResponse = decodeOrders(await readJson(response), response)
      return orders
    },

    async cancelOrder(id, { signal } = {}) {
      const orderId: CancelOrderId | string = id
      if (typeof orderId !== 'bigint' && typeof orderId !== 'string') {
        // A JS number is exact only up to 2^53: refusing it is the only way not to cancel the wrong order.
        throw new TypeError('cancelOrder: the id must be a bigint or a decimal string')
      }
      const response = await call('DELETE', `store/orders/${encodeURIComponent(orderId.toString())}`, signal)
      await response.body?.cancel()
    },
  }
}
