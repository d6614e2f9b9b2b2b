import type { ApiKey, Scope } from '../domain/api-keys.js'
import { parseMetadataText } from '../domain/order-metadata.js'
import type { CancellationReason, OrderStatus, OrderV2Record } from '../domain/orders.js'
import type { Pet } from '../schemas/pet.js'

// Rows as both stores' drivers return them, mapped to the domain's objects. Where the types differ,
// SQLite's comes first: INTEGER as bigint (booleans 0n or 1n), instants as toISOString() text, lists
// comma-joined.

/** An order as v2 shows it (getOrder, the writes' answers); instants as toISOString() text. */
export interface OrderV2Row {
  id: bigint
  pet_id: bigint | null
  quantity: bigint | number | null
  ship_date: string | null
  complete: bigint | boolean
  status: OrderStatus
  shipped_at: string | null
  completed_at: string | null
  cancelled_at: string | null
  cancellation_reason: CancellationReason | null
  metadata: string | null
  version: bigint | number
}

export function toOrderV2Record(row: OrderV2Row): OrderV2Record {
  return {
    id: row.id,
    petId: row.pet_id,
    quantity: row.quantity === null ? null : Number(row.quantity),
    shipDate: row.ship_date,
    complete: Boolean(row.complete),
    status: row.status,
    shippedAt: row.shipped_at,
    completedAt: row.completed_at,
    cancelledAt: row.cancelled_at,
    cancellationReason: row.cancellation_reason,
    metadata: parseMetadataText(row.metadata),
    version: Number(row.version),
  }
}

export const KEY_COLUMNS = 'id, name, display_prefix, scopes, created_at, expires_at, revoked_at'

/** A row of api_keys (the hash is never read back). */
export interface KeyRow {
  id: bigint
  name: string
  display_prefix: string
  scopes: string | string[]
  created_at: string | Date
  expires_at: string | Date | null
  revoked_at: string | Date | null
}

export function toApiKey(row: KeyRow): ApiKey {
  return {
    id: row.id,
    name: row.name,
    displayPrefix: row.display_prefix,
    scopes: (typeof row.scopes === 'string' ? row.scopes.split(',') : row.scopes) as Scope[],
    createdAt: new Date(row.created_at),
    expiresAt: row.expires_at === null ? null : new Date(row.expires_at),
    revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at),
  }
}

export interface PetRow {
  id: bigint
  name: string
  tag: string | null
}

export function toPet(row: PetRow): Pet {
  return row.tag === null ? { id: row.id, name: row.name } : { id: row.id, name: row.name, tag: row.tag }
}
