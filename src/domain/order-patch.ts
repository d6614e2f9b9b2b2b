import { mergeMetadata, sameMetadata, type OrderMetadata } from './order-metadata.js'
import { checkNewOrder, preconditionFailed, type ExpectedVersion, type OrderV2Record, type PreconditionFailed } from './orders.js'

/**
 * updateOrder's change, a JSON Merge Patch (RFC 7396) read and checked by the API or the CLI: a
 * field absent is left as it is; `shipDate` null removes the ship date; `metadata` maps a key to its
 * new value, or to null to remove it (every key and value already checked: order-metadata.ts), or is
 * null to remove every key.
 */
export interface OrderPatch {
  petId?: bigint
  quantity?: number
  shipDate?: string | null
  metadata?: ReadonlyMap<string, string | null> | null
}

/**
 * The value each top-level field a change changed had before it (`order.updated`'s `previous`): a
 * field that was absent is null; `metadata` is the whole previous object.
 */
export interface OrderPrevious {
  petId?: bigint | null
  quantity?: number | null
  shipDate?: string | null
  metadata?: OrderMetadata | null
}

/**
 * What one patch found. `updated`: the order as the patch leaves it (its version one more) and what
 * it changed. `unchanged`: the patch changes nothing (every value is the order's already): nothing is
 * written, the version stays. `not_pending`: it would change petId, quantity or shipDate of an order
 * that has shipped or been cancelled. `too_many_keys`: the merged metadata would have more than 50.
 */
export type UpdateResult =
  | { outcome: 'updated'; order: OrderV2Record; previous: OrderPrevious }
  | { outcome: 'unchanged'; order: OrderV2Record }
  | { outcome: 'not_pending' }
  | { outcome: 'too_many_keys'; message: string }
  | PreconditionFailed
  | { outcome: 'not_found' }
export type UpdateOutcome = UpdateResult['outcome']

/** An update a store runs: the order, the patch, and the version it requires (If-Match). */
export interface UpdateRequest {
  id: bigint
  patch: OrderPatch
  expected?: ExpectedVersion
}

/**
 * Why a store refuses a patch's values, or undefined: checkNewOrder's limits, as for a place (the
 * API's schema refuses most of them first, with a 400). Both stores check an update with it before
 * it joins a batch, which a statement it failed would fail whole.
 */
export function checkPatch({ patch }: UpdateRequest): string | undefined {
  return checkNewOrder({ petId: patch.petId ?? null, quantity: patch.quantity ?? null, shipDate: patch.shipDate ?? null })
}

/**
 * The rule of updateOrder, whichever store runs it: `order` as it stands in the writing transaction
 * (undefined: none), `patch` applied to it. Checked in this order: the order exists; the version is
 * the expected one; the order fields change only while pending (a value equal to the order's is no
 * change, so a retried patch of a shipped order is answered, not refused); metadata in any state.
 */
export function applyPatch(order: OrderV2Record | undefined, patch: OrderPatch, expected?: ExpectedVersion): UpdateResult {
  if (order === undefined) return { outcome: 'not_found' }
  const failed = preconditionFailed(order, expected)
  if (failed !== undefined) return failed
  const previous: OrderPrevious = {}
  const next: OrderV2Record = { ...order }
  if (patch.petId !== undefined && patch.petId !== order.petId) {
    previous.petId = order.petId
    next.petId = patch.petId
  }
  if (patch.quantity !== undefined && patch.quantity !== order.quantity) {
    previous.quantity = order.quantity
    next.quantity = patch.quantity
  }
  if (patch.shipDate !== undefined && patch.shipDate !== order.shipDate) {
    previous.shipDate = order.shipDate
    next.shipDate = patch.shipDate
  }
  if (Object.keys(previous).length > 0 && order.status !== 'pending') return { outcome: 'not_pending' }
  if (patch.metadata !== undefined) {
    let metadata: OrderMetadata | null
    try {
      metadata = patch.metadata === null ? null : mergeMetadata(order.metadata, patch.metadata)
    } catch (error) {
      if (error instanceof RangeError) return { outcome: 'too_many_keys', message: error.message }
      throw error
    }
    if (!sameMetadata(metadata, order.metadata)) {
      previous.metadata = order.metadata
      next.metadata = metadata
    }
  }
  if (Object.keys(previous).length === 0) return { outcome: 'unchanged', order }
  next.version = order.version + 1
  return { outcome: 'updated', order: next, previous }
}

/** `previous` as its event carries it: petId, quantity, shipDate, metadata (the Order's order), petId an exact integer literal. */
export function previousJson(previous: OrderPrevious): string {
  const fields: string[] = []
  if (previous.petId !== undefined) fields.push(`"petId":${previous.petId === null ? 'null' : previous.petId.toString()}`)
  if (previous.quantity !== undefined) fields.push(`"quantity":${previous.quantity === null ? 'null' : previous.quantity}`)
  if (previous.shipDate !== undefined) fields.push(`"shipDate":${JSON.stringify(previous.shipDate)}`)
  if (previous.metadata !== undefined) fields.push(`"metadata":${JSON.stringify(previous.metadata)}`)
  return `{${fields.join(',')}}`
}
