/**
 * An order's metadata: the store's own references on an order (a customer id, a cart, a note),
 * string keys to string values, never interpreted here. The rules are the same wherever metadata
 * comes from (placeOrder, updateOrder, `orders import`), on either store.
 */

/** Key → value, in the order the keys were first set; an order without metadata has none (null). */
export type OrderMetadata = Record<string, string>

export const MAX_METADATA_KEYS = 50
export const MAX_METADATA_KEY_LENGTH = 40
export const MAX_METADATA_VALUE_LENGTH = 500
/** A key: 1–40 of `A–Z a–z 0–9 _ - . :`. */
export const METADATA_KEY_PATTERN = `^[A-Za-z0-9_.:-]{1,${MAX_METADATA_KEY_LENGTH}}$`
const KEY = new RegExp(METADATA_KEY_PATTERN)
// With the u flag, \p{Cs} matches only a surrogate that is not half of a pair.
const LONE_SURROGATE = /\p{Cs}/u

/** Why `key` cannot be a metadata key, or undefined. */
export function metadataKeyProblem(key: string): string | undefined {
  if (KEY.test(key)) return undefined
  return `metadata key ${JSON.stringify(key.length > 60 ? `${key.slice(0, 60)}…` : key)} must be 1 to ${MAX_METADATA_KEY_LENGTH} characters of A-Z a-z 0-9 _ - . :`
}

/**
 * Why `value` cannot be the value of metadata `key`, or undefined: a string of at most 500
 * characters (Unicode code points), well formed (no lone surrogate, which UTF-8 cannot carry), and
 * without U+0000, which PostgreSQL's text cannot hold.
 */
export function metadataValueProblem(key: string, value: unknown): string | undefined {
  if (typeof value !== 'string') return `metadata value of ${JSON.stringify(key)} must be a string`
  // Code points: at most 500 of them, at most 1,000 UTF-16 units; count only when it could matter.
  if (value.length > MAX_METADATA_VALUE_LENGTH && [...value].length > MAX_METADATA_VALUE_LENGTH) {
    return `metadata value of ${JSON.stringify(key)} must be at most ${MAX_METADATA_VALUE_LENGTH} characters`
  }
  if (LONE_SURROGATE.test(value)) return `metadata value of ${JSON.stringify(key)} has a lone surrogate`
  if (value.includes('\u0000')) return `metadata value of ${JSON.stringify(key)} must not contain U+0000`
  return undefined
}

/**
 * Metadata as an object with an own property per key, `__proto__` and `constructor` included
 * (CreateDataProperty, never an assignment that would reach the prototype); empty: null.
 */
export function toMetadata(entries: Iterable<[string, string]>): OrderMetadata | null {
  const metadata = Object.fromEntries(entries) as OrderMetadata
  return Object.keys(metadata).length === 0 ? null : metadata
}

/**
 * A merge of metadata (RFC 7396, one level): a key set to a string adds or replaces it, set to
 * null removes it; the others stay, in their order. Throws RangeError when the result would have
 * more than 50 keys (each key and value the caller has checked).
 */
export function mergeMetadata(current: OrderMetadata | null, patch: ReadonlyMap<string, string | null>): OrderMetadata | null {
  const merged = new Map(current === null ? [] : Object.entries(current))
  for (const [key, value] of patch) {
    if (value === null) merged.delete(key)
    else merged.set(key, value)
  }
  if (merged.size > MAX_METADATA_KEYS) throw new RangeError(`metadata must have at most ${MAX_METADATA_KEYS} keys`)
  return toMetadata(merged)
}

/** Whether two metadata hold the same keys with the same values (order aside). */
export function sameMetadata(a: OrderMetadata | null, b: OrderMetadata | null): boolean {
  const aKeys = a === null ? [] : Object.keys(a)
  const bKeys = b === null ? [] : Object.keys(b)
  return aKeys.length === bKeys.length && aKeys.every((key) => Object.hasOwn(b!, key) && b![key] === a![key])
}

/** Metadata as both stores keep it: its JSON text (JSON.stringify's key order), or NULL for none. */
export function metadataText(metadata: OrderMetadata | null): string | null {
  return metadata === null ? null : JSON.stringify(metadata)
}

/** Stored metadata text read back (JSON.parse makes own properties, `__proto__` too). */
export function parseMetadataText(text: string | null): OrderMetadata | null {
  return text === null ? null : (JSON.parse(text) as OrderMetadata)
}
