import Type from 'typebox'
import { EVENT_POSITION_PATTERN, ORDER_EVENT_TYPES } from '../domain/order-events.js'
import { OrderV2Ref } from './order-v2.js'
import { Int64 } from './primitives.js'

export { EVENT_POSITION_PATTERN }

/** The longest wait a long poll may ask for, in seconds (docs/order-events.md). */
export const MAX_WAIT_SECONDS = 30

/**
 * One change to an order, as the event feed shows it. `id` is the event's position in the feed, a
 * decimal string (an int64 would not survive a JSON number in most clients), also usable as `after`.
 */
export const OrderEvent = Type.Object(
  {
    id: Type.String({
      pattern: EVENT_POSITION_PATTERN,
      description: "The event's position in the feed, in decimal: ascending in the order events are read; pass it as `after` to resume after it",
    }),
    type: Type.String({
      enum: [...ORDER_EVENT_TYPES],
      description:
        'What happened: `order.created` (placeOrder, or an import of a new order), `order.updated` (updateOrder, ' +
        'or an import that changed the order), `order.shipped`, `order.completed`, `order.cancelled` (through v1 or v2)',
    }),
    occurredAt: Type.String({ format: 'date-time', description: 'When the change happened (RFC 3339, UTC)' }),
    order: OrderV2Ref,
    previous: Type.Optional(
      Type.Object(
        {
          petId: Type.Optional(Type.Union([Int64(), Type.Null()], { description: 'The petId before (null: it had none)' })),
          quantity: Type.Optional(Type.Union([Type.Integer({ format: 'int32', minimum: 1 }), Type.Null()], { description: 'The quantity before (null: none)' })),
          shipDate: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'The ship date before (null: none)' })),
          metadata: Type.Optional(
            Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()], { description: 'The whole metadata before (null: none)' }),
          ),
        },
        {
          additionalProperties: false,
          description:
            "An `order.updated` of updateOrder only: the value before the change of each field it changed, and of no other " +
            '(`metadata` as the whole previous object); a field the order did not have is `null`',
        },
      ),
    ),
  },
  {
    $id: 'OrderEvent',
    description: 'One change to an order, with the order (v2) as it was right after the change',
    additionalProperties: false,
    examples: [
      {
        id: '1042',
        type: 'order.cancelled',
        occurredAt: '2026-11-20T08:15:00.000Z',
        order: {
          id: 10,
          complete: false,
          status: 'cancelled',
          version: 2,
          petId: 198772,
          quantity: 7,
          shipDate: '2026-11-25T10:00:00.000Z',
          cancelledAt: '2026-11-20T08:15:00.000Z',
          cancellationReason: 'customer_request',
        },
      },
    ],
  },
)

const OrderEventRef = Type.Unsafe<Type.Static<typeof OrderEvent>>({ $ref: 'OrderEvent#' })

/** A page of the event feed. `nextCursor` is always there: the feed has no last page. */
export const OrderEventPage = Type.Object(
  {
    data: Type.Array(OrderEventRef, { description: 'The events of this page, in feed order; empty when none followed `after` in time' }),
    nextCursor: Type.String({
      pattern: EVENT_POSITION_PATTERN,
      description:
        'Where to resume: pass it as `after` for the events that follow this page. Present on every page, the empty ones included',
    }),
  },
  { additionalProperties: false },
)

/**
 * The query of the event feed. `http/strict-query.ts` validates it from this schema (no other
 * parameter, none repeated, each value of its type); `after` is any text there, checked by the
 * route, so that a malformed one is 400 `invalid_cursor` like any other cursor it does not know.
 */
export const ListOrderEventsQuery = Type.Object(
  {
    after: Type.Optional(
      Type.String({
        description:
          'Where to start: a `nextCursor`, or the `id` of an event (the page starts after it): a decimal position up to 2^63−1. ' +
          'Omitted: from the oldest event still retained, inclusive',
        examples: ['100'],
      }),
    ),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'How many events a page holds at most (1–1000)', examples: [100] }),
    ),
    wait: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_WAIT_SECONDS,
        default: 0,
        description:
          'Seconds to hold the request when no event follows `after` yet (0–30): it is answered as soon as one is committed, or with an empty page when the wait ends',
        examples: [20],
      }),
    ),
  },
  { additionalProperties: false },
)
export type ListOrderEventsQuery = Type.Static<typeof ListOrderEventsQuery>
