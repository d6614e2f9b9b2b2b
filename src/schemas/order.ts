import Type from 'typebox'
import { Int64 } from './primitives.js'

/**
 * The Order resource: exactly the five fields of v1's contract, none of them marked required;
 * the service always sends `id` and `complete`. An unknown value is omitted, never null.
 */
export const Order = Type.Object(
  {
    id: Type.Optional(Int64({ description: 'Unique order identifier' })),
    petId: Type.Optional(Int64({ description: 'Identifier of the animal in this order' })),
    quantity: Type.Optional(Type.Integer({ format: 'int32', minimum: 1, description: 'Number of units ordered' })),
    shipDate: Type.Optional(
      Type.String({ format: 'date-time', description: 'Expected or actual ship date (RFC 3339, UTC)' }),
    ),
    complete: Type.Optional(Type.Boolean({ description: 'Whether the order has been fulfilled' })),
  },
  {
    $id: 'Order',
    additionalProperties: false,
    examples: [{ id: 10, petId: 198772, quantity: 7, shipDate: '2026-11-25T10:00:00Z', complete: false }],
  },
)
export type Order = Type.Static<typeof Order>

export const OrderRef = Type.Unsafe<Order>({ $ref: 'Order#' })

export const OrderIdParams = Type.Object({
  orderId: Int64({ description: 'The identifier of the order to cancel' }),
})
