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
