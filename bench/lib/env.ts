/** The positive integer variable `name` holds; undefined when it is unset or empty, and anything else an error naming it. */
export function positiveInteger(name: string): number | undefined {
  const value = process.env[name]
  if (value === undefined || value === '') return undefined
  if (!/^[1-9][0-9]*$/.test(value)) throw new Error(`${name} must be a positive integer, got "${value}"`)
  return Number(value)
}
