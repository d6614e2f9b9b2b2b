// YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM), RFC 3339 §5.6 (T and Z in either case).
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/

/**
 * An RFC 3339 date-time with a timezone, as the same instant in UTC in `toISOString()` form
 * (`2026-11-25T10:00:00.000Z`), or undefined. The one reading of a date-time, for imports and query
 * filters alike, so that the same text always means the same stored instant:
 * - instants are kept to the millisecond; a finer fraction is rounded up to the next one, so a
 *   filter's `>= from` and `< to` stay exact against stored instants, and an order imported with
 *   the text a filter is given is on the `from` side of it;
 * - years are those of the text (`0099` is 99, never 1999), and the instant in UTC must fall in
 *   years 0001–9999, the range both stores hold (PostgreSQL has no year 0);
 * - leap seconds (`:60`) are refused: a JavaScript Date cannot hold them.
 */
export function parseDateTime(text: string): string | undefined {
  const m = RFC3339.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number]
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 59) return undefined
  let offsetMinutes = 0
  if (m[8] !== undefined) {
    const [offsetHours, offsetMins] = [Number(m[9]), Number(m[10])]
    if (offsetHours > 23 || offsetMins > 59) return undefined
    offsetMinutes = (m[8] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMins)
  }
  const fraction = m[7] ?? ''
  const millis = Number(fraction.slice(0, 3).padEnd(3, '0')) + (/[1-9]/.test(fraction.slice(3)) ? 1 : 0)
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day) // not Date.UTC: it reads years 0–99 as 1900–1999
  date.setUTCHours(hour, minute, second, millis)
  const instant = new Date(date.getTime() - offsetMinutes * 60_000)
  const utcYear = instant.getUTCFullYear()
  return utcYear >= 1 && utcYear <= 9999 ? instant.toISOString() : undefined
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28
  return [4, 6, 9, 11].includes(month) ? 30 : 31
}
