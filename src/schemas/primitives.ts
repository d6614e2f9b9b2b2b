import Type from 'typebox'

/**
 * An int64 integer. Inside the service it is a `bigint`; on the wire an exact JSON integer literal.
 * Path parameters of this type are parsed by `http/int64-params.ts`, never coerced through `number`.
 */
export function Int64(options: { description?: string; examples?: (string | number)[]; minimum?: number } = {}) {
  return Type.Unsafe<bigint>({ type: 'integer', format: 'int64', ...options })
}
