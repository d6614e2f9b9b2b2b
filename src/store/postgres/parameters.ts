/**
 * Values as PostgreSQL statements take them, as parameter text: int64 as decimal (int8), and
 * arrays as array literals (intArray, boolArray, textArray).
 */

/** int64 parameters go to the server as decimal text: never through a JS number. */
export function int8(value: bigint): string
export function int8(value: bigint | null): string | null
export function int8(value: bigint | null): string | null {
  return value === null ? null : value.toString()
}

/**
 * Array literals for the array parameters of a batch (an import's, a group commit's), built directly:
 * pg would build the same text, but an import sends millions of elements and this is cheaper.
 * Integers and booleans need no quoting; text elements are quoted and escaped.
 */
export function intArray(values: (bigint | number | null)[]): string {
  let text = '{'
  for (let i = 0; i < values.length; i++) {
    const value = values[i]
    text += (i === 0 ? '' : ',') + (value === null || value === undefined ? 'NULL' : value.toString())
  }
  return text + '}'
}

export function boolArray(values: boolean[]): string {
  let text = '{'
  for (let i = 0; i < values.length; i++) text += (i === 0 ? '' : ',') + (values[i] ? 't' : 'f')
  return text + '}'
}

export function textArray(values: (string | null | undefined)[]): string {
  let text = '{'
  for (let i = 0; i < values.length; i++) {
    const value = values[i]
    text += (i === 0 ? '' : ',') + (value === null || value === undefined ? 'NULL' : `"${value.replace(/[\\"]/g, '\\$&')}"`)
  }
  return text + '}'
}
