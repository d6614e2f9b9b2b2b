/**
 * int64 identifiers. Ids travel as `bigint` inside the service and as decimal text on the wire and
 * in SQL parameters; they never pass through a JS `number`, which is exact only up to 2^53.
 */
export const INT64_MIN = -(2n ** 63n)
export const INT64_MAX = 2n ** 63n - 1n

// An optional minus, then at most 19 significant digits (leading zeros are allowed and dropped).
const DECIMAL = /^(-?)0*([0-9]{1,19})$/

/** Parses a decimal integer in the int64 range, or returns undefined. Accepts nothing else. */
export function parseInt64(text: string): bigint | undefined {
  const match = DECIMAL.exec(text)
  if (match === null) return undefined
  const value = BigInt(match[1]! + match[2]!)
  return value < INT64_MIN || value > INT64_MAX ? undefined : value
}
