import Type from 'typebox'
import { CANCELLATION_REASONS, type CancellationReason, type OrderV2Record, ORDER_STATUSES } from '../domain/orders.js'
import { Int64 } from './primitives.js'
import { MAX_METADATA_KEYS, MAX_METADATA_VALUE_LENGTH, METADATA_KEY_PATTERN } from '../domain/order-metadata.js'
import { MAX_METADATA_FILTERS } from '../domain/order-pages.js'

const METADATA_RULES =
  `at most ${MAX_METADATA_KEYS} keys, each 1–40 characters of \`A–Z a–z 0–9 _ - . :\` (\`${METADATA_KEY_PATTERN}\`), each value ` +
  `a string of at most ${MAX_METADATA_VALUE_LENGTH} characters`

/**
 * An order's metadata as v2 shows it and placeOrder takes it: the store's own keys and values. The
 * key pattern (METADATA_KEY_PATTERN) is in the description: OpenAPI 3.0 has no `propertyNames`.
 */
const Metadata = (description: string, value = Type.String({ maxLength: MAX_METADATA_VALUE_LENGTH }), nullable = false) =>
  Type.Unsafe<Record<string, string>>({
    type: 'object',
    additionalProperties: value,
    maxProperties: MAX_METADATA_KEYS,
    description,
    // OpenAPI 3.0's null, as the document shows it (a union with Type.Null() would show as an anyOf).
    ...(nullable ? { nullable: true } : {}),
  })

/**
 * The v2 Order: the v1 fields, `status` (always); on a shipped order `shippedAt` and on a complete one
 * `completedAt`, when known; on a cancelled order `cancelledAt` and, when one was given,
 * `cancellationReason`. An unknown value is omitted, never null.
 */
export const OrderV2 = Type.Object(
  {
    id: Int64({ description: 'Unique order identifier' }),
    petId: Type.Optional(Int64({ description: 'Identifier of the animal in this order' })),
    quantity: Type.Optional(Type.Integer({ format: 'int32', minimum: 1, description: 'Number of units ordered' })),
    shipDate: Type.Optional(Type.String({ format: 'date-time', description: 'Expected or actual ship date (RFC 3339, UTC)' })),
    complete: Type.Boolean({ description: 'Whether the order has been fulfilled (only ever true for a shipped order)' }),
    status: Type.String({ enum: [...ORDER_STATUSES], description: 'Where the order stands: pending, shipped or cancelled' }),
    shippedAt: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'When the order was shipped (RFC 3339, UTC); shipped orders only, and only when known (not for imported ones)',
      }),
    ),
    completedAt: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'When the order was completed (RFC 3339, UTC); complete orders only, and only when known (not for imported ones)',
      }),
    ),
    cancelledAt: Type.Optional(
      Type.String({ format: 'date-time', description: 'When the order was cancelled (RFC 3339, UTC); cancelled orders only' }),
    ),
    cancellationReason: Type.Optional(
      Type.String({ enum: [...CANCELLATION_REASONS], description: 'Why the order was cancelled, when a reason was given' }),
    ),
    metadata: Type.Optional(
      Metadata(
        `The store's own keys and values on the order (a customer id, a cart, a note), never interpreted by the service; ` +
          `present when it has at least one key. ${METADATA_RULES}`,
      ),
    ),
    version: Type.Integer({
      minimum: 1,
      format: 'int32',
      description:
        '1 when the order is placed, one more with every change of any kind (update, ship, complete, cancel, an import). ' +
        'The `ETag` of getOrder and of every write is this number in quotes; send it back in `If-Match` to change the order only if nobody else has.',
    }),
  },
  {
    $id: 'OrderV2',
    additionalProperties: false,
    examples: [
      {
        id: 10,
        petId: 198772,
        quantity: 7,
        shipDate: '2026-11-25T10:00:00.000Z',
        complete: false,
        status: 'cancelled',
        cancelledAt: '2026-11-20T08:15:00.000Z',
        cancellationReason: 'customer_request',
        metadata: { customer: 'c-1042', channel: 'web' },
        version: 3,
      },
    ],
  },
)
export type OrderV2 = Type.Static<typeof OrderV2>

/** The v2 view of a stored order: unknown values omitted, never null. */
export function toApiOrderV2(record: OrderV2Record): OrderV2 {
  const order: OrderV2 = { id: record.id, complete: record.complete, status: record.status, version: record.version }
  if (record.petId !== null) order.petId = record.petId
  if (record.quantity !== null) order.quantity = record.quantity
  if (record.shipDate !== null) order.shipDate = record.shipDate
  if (record.status === 'shipped') {
    if (record.shippedAt !== null) order.shippedAt = record.shippedAt
    if (record.complete && record.completedAt !== null) order.completedAt = record.completedAt
  }
  if (record.status === 'cancelled') {
    if (record.cancelledAt !== null) order.cancelledAt = record.cancelledAt
    if (record.cancellationReason !== null) order.cancellationReason = record.cancellationReason
  }
  if (record.metadata !== null) order.metadata = record.metadata
  order.version = record.version
  return order
}

export const OrderV2Ref = Type.Unsafe<OrderV2>({ $ref: 'OrderV2#' })

/** A page of the v2 list. */
export const OrderPage = Type.Object(
  {
    data: Type.Array(OrderV2Ref, { description: 'The orders of this page, ascending id' }),
    nextCursor: Type.Optional(
      Type.String({
        description: 'Present exactly when more matching orders follow: pass it as `cursor`, with the same filters, for the next page',
      }),
    ),
  },
  { additionalProperties: false },
)

const STATUS_LIST = `^(${ORDER_STATUSES.join('|')})(,(${ORDER_STATUSES.join('|')}))*$`

/**
 * The query of the v2 list. `http/strict-query.ts` validates a request's query from this schema:
 * no other parameter, none repeated, each value of its type.
 */
export const ListOrdersQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'How many orders a page holds at most (1–1000)', examples: [100] }),
    ),
    cursor: Type.Optional(
      // No pattern: the route reads any text, and one that is not a cursor it issued is 400
      // `invalid_cursor`, as an altered one is (not `invalid_parameter`).
      Type.String({
        description: 'The `nextCursor` of the previous page; the other parameters must be the same as for that page (`limit` may change)',
      }),
    ),
    status: Type.Optional(
      Type.String({
        pattern: STATUS_LIST,
        default: 'pending,shipped',
        description: 'Comma-separated statuses to include (`pending`, `shipped`, `cancelled`)',
        examples: ['pending,shipped', 'cancelled'],
      }),
    ),
    petId: Type.Optional(Int64({ description: 'Only the orders of this pet (int64, exact)' })),
    complete: Type.Optional(Type.Boolean({ description: 'Only fulfilled (`true`) or unfulfilled (`false`) orders' })),
    shipDateFrom: Type.Optional(
      Type.String({
        format: 'date-time',
        description:
          'Only orders shipping at or after this instant (RFC 3339, such as `2026-11-01T00:00:00Z`); orders without a ship date are left out',
      }),
    ),
    shipDateTo: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'Only orders shipping before this instant (RFC 3339, such as `2026-12-01T00:00:00Z`), which must be later than `shipDateFrom`',
      }),
    ),
    metadata: Type.Optional(
      Type.Unsafe<ReadonlyMap<string, string>>({
        type: 'object',
        additionalProperties: { type: 'string', maxLength: MAX_METADATA_VALUE_LENGTH },
        maxProperties: MAX_METADATA_FILTERS,
        description:
          `Only orders whose metadata has this key with exactly this value: \`metadata[KEY]=VALUE\`, such as ` +
          `\`metadata[customer]=c-1042\`; up to ${MAX_METADATA_FILTERS} keys, all of which must match (as every other filter ` +
          `must). Keys as in an order's metadata (1–40 characters of \`A–Z a–z 0–9 _ - . :\`); a value is a string of at most ` +
          `${MAX_METADATA_VALUE_LENGTH} characters, compared exactly (case and spaces count; empty matches an empty value). ` +
          'A key given twice, or a fourth key, is refused (`invalid_parameter`).',
        // No filter by default: /docs would otherwise fill in a sample key and value, which no order has.
        examples: [{}],
      }),
    ),
  },
  { additionalProperties: false },
)
export type ListOrdersQuery = Type.Static<typeof ListOrdersQuery>

export const OrderIdV2Params = Type.Object({
  orderId: Int64({ description: 'The identifier of the order' }),
})

/** getOrder takes no query parameter: any is refused (400 `invalid_parameter`), as on the list. */
export const NoQuery = Type.Object({}, { additionalProperties: false })

/** cancelOrder's optional body: why the order is cancelled. `http/strict-body.ts` validates it. */
export const CancelOrderBody = Type.Object(
  {
    reason: Type.Optional(
      Type.Unsafe<CancellationReason>({
        type: 'string',
        enum: [...CANCELLATION_REASONS],
        description: 'Why the order is cancelled; recorded with the first cancellation only',
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'Optional: the request may have no body at all',
    examples: [{ reason: 'customer_request' }],
  },
)
export type CancelOrderBody = Type.Static<typeof CancelOrderBody>

/** The most units one order may have (placeOrder); imported orders may hold more. */
export const MAX_PLACE_QUANTITY = 1000

/**
 * placeOrder's body. `http/strict-body.ts` validates it: `petId` exact as an int64 however large,
 * `quantity` an integer literal, `shipDate` read by `domain/date-time.ts` into the stored form.
 */
export const PlaceOrderBody = Type.Object(
  {
    petId: Int64({ minimum: 1, description: 'Identifier of the animal ordered (int64, exact; 1 or more). Not checked against the pets.' }),
    quantity: Type.Integer({ minimum: 1, maximum: MAX_PLACE_QUANTITY, description: 'Number of units ordered (1–1000)' }),
    shipDate: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'Expected ship date (RFC 3339 with a time zone); stored and returned in UTC, to the millisecond',
      }),
    ),
    metadata: Type.Optional(Metadata(`The store's own keys and values to keep on the order, never interpreted by the service: ${METADATA_RULES}`)),
  },
  {
    additionalProperties: false,
    description: 'The order to place: the server gives it its id; it is `pending` and not `complete`',
    examples: [{ petId: 7, quantity: 2, shipDate: '2026-12-01T10:00:00Z' }],
  },
)
export type PlaceOrderBody = Omit<Type.Static<typeof PlaceOrderBody>, 'metadata'> & { metadata?: ReadonlyMap<string, string> }

/**
 * updateOrder's body, a JSON Merge Patch (RFC 7396): each member given replaces the order's, null
 * removes it (shipDate, a metadata key, metadata as a whole); `metadata` is merged key by key.
 * `http/strict-body.ts` validates it as it does placeOrder's.
 */
export const UpdateOrderBody = Type.Object(
  {
    petId: Type.Optional(Int64({ minimum: 1, description: 'The animal ordered (int64, exact; 1 or more); pending orders only' })),
    quantity: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PLACE_QUANTITY, description: 'Number of units (1–1000); pending orders only' })),
    shipDate: Type.Optional(
      Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
        description: 'Expected ship date (RFC 3339 with a time zone), or null to remove it; pending orders only',
      }),
    ),
    metadata: Type.Optional(
      Metadata(
        `Keys to add or replace (a string) or to remove (null), keys not named staying as they are; or null to remove ` +
          `every key. Changes in any state. The order's metadata after the merge must keep to the same rules: ${METADATA_RULES}`,
        Type.Union([Type.String({ maxLength: MAX_METADATA_VALUE_LENGTH }), Type.Null()]) as never,
        true, // null too: every key removed
      ),
    ),
  },
  {
    additionalProperties: false,
    description:
      'A JSON Merge Patch of the order: only the members given change. `id`, `status`, `complete` and the times are not ' +
      'patchable (status moves through ship, complete and cancel). `{}` changes nothing.',
    examples: [{ quantity: 3, metadata: { customer: 'c-1042', note: null } }],
  },
)
export type UpdateOrderBody = {
  petId?: bigint
  quantity?: number
  shipDate?: string | null
  metadata?: ReadonlyMap<string, string | null> | null
}

/**
 * An entity-tag list as RFC 9110 §13.1.1 writes If-Match and If-None-Match: `*`, or tags separated
 * by commas (empty elements allowed), each quoted, weak with `W/`.
 */
const ENTITY_TAG = '(W/)?"[\\x21\\x23-\\x7E\\x80-\\xFF]*"'
export const ENTITY_TAGS_PATTERN = `^[ \\t]*(\\*|(,[ \\t]*)*${ENTITY_TAG}([ \\t]*,([ \\t]*${ENTITY_TAG})?)*)[ \\t]*$`

const EntityTagsHeader = (description: string) => Type.Optional(Type.String({ pattern: ENTITY_TAGS_PATTERN, description }))

/** The headers of a write to one order: the versions it may change (If-Match) or not (If-None-Match). */
export const WriteConditionHeaders = Type.Object({
  'If-Match': EntityTagsHeader(
    'Change the order only if it is still at this version: its `ETag`, such as `"3"` (a list: any of them; `*`: any ' +
      'version). Another version is 412 `precondition_failed`, and nothing changes; a weak tag never matches. Without it ' +
      'the write applies to the order as it stands.',
  ),
  'If-None-Match': EntityTagsHeader(
    'Change the order only if it is not at this version (a list: none of them); `*` refuses any existing order. ' +
      'Otherwise 412 `precondition_failed`, and nothing changes.',
  ),
})

/** getOrder's headers: the ETag a cache holds (If-None-Match), the version required (If-Match). */
export const ReadConditionHeaders = Type.Object({
  'If-None-Match': EntityTagsHeader('The `ETag` of a copy held, such as `"3"` (or a list, or `*`): 304 with no body while the order is still at that version'),
  'If-Match': EntityTagsHeader('Answer only if the order is at this version, such as `"3"` (or any of a list, or `*`): 412 `precondition_failed` otherwise'),
})

/** shipOrder's and completeOrder's body: none, or an empty object. */
export const EmptyBody = Type.Object({}, { additionalProperties: false, description: 'Optional: no body, or `{}`' })

/** shipOrder's path, with an order of the demo data that is pending (`npm start`; the README cancels 3). */
export const ShipOrderParams = Type.Object({
  orderId: Int64({ description: 'The identifier of the order to ship', examples: [4] }),
})

/** completeOrder's path, with an order of the demo data that is shipped and not complete. */
export const CompleteOrderParams = Type.Object({
  orderId: Int64({ description: 'The identifier of the order to complete', examples: [1] }),
})

/**
 * placeOrder's headers: the optional Idempotency-Key. `http/strict-headers.ts` checks it (400
 * `invalid_idempotency_key`); any other header is left alone.
 */
export const PlaceOrderHeaders = Type.Object({
  'Idempotency-Key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x21-\\x7E]{1,255}$',
      description:
        'Makes a retry safe: a request with a key already used by this API key in the last IDEMPOTENCY_KEY_TTL_HOURS ' +
        '(24 by default) places nothing and gets the first response again (with `Idempotent-Replayed: true`), when its ' +
        'body is the same order (422 `idempotency_key_reused` otherwise). 1–255 visible ASCII characters, no spaces, ' +
        'taken as sent (quotes included); a UUID is a good key.',
      // No example: /docs would send it on every "Try it out", and a second order with another
      // body would be refused (422). The page makes a fresh key for each request instead.
    }),
  ),
})
