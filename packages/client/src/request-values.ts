// The values a request carries, checked before it is sent where a mistake would be silent.

export function instant(value: Date | string): string {
  return value instanceof Date ? value.toISOString() : value
}

/** A bigint or a decimal string, as text; a JS number is exact only up to 2^53, so it is refused. */
export function int64Text(value: unknown, what: string): string {
  if (typeof value !== 'bigint' && typeof value !== 'string') throw new TypeError(`${what}: must be a bigint or a decimal string`)
  return value.toString()
}

/** An id in a path: a bigint or a decimal string (a JS number is refused), encoded. */
export function idPath(id: unknown, operation: string): string {
  return encodeURIComponent(int64Text(id, `${operation}: the id`))
}

/**
 * The If-Match header of a write to an order: an ETag as the server sent it (`"3"`, or `*`), or the
 * order's `version` (3), quoted here. None when `ifMatch` is undefined.
 */
export function ifMatchHeaders(ifMatch: unknown, operation: string): Record<string, string> | undefined {
  if (ifMatch === undefined) return undefined
  if (typeof ifMatch === 'number') {
    if (!Number.isSafeInteger(ifMatch) || ifMatch < 1) throw new TypeError(`${operation}: ifMatch must be an order's version (an integer, 1 or more) or its ETag`)
    return { 'if-match': `"${ifMatch}"` }
  }
  if (typeof ifMatch !== 'string' || ifMatch === '') throw new TypeError(`${operation}: ifMatch must be an ETag (such as '"3"') or an order's version`)
  return { 'if-match': ifMatch }
}
