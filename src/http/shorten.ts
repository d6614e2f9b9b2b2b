/** The most characters of a client's value that an error message or a log line repeats. */
export const MAX_ECHOED_CHARS = 64

/**
 * A value the client sent, as an error message or a log line may repeat it: its first
 * MAX_ECHOED_CHARS characters, and `…` when it was longer. A client must not be able to make an
 * answer or a log line as large as its request (a 15,000-character value echoed in a 400 body and
 * logged whole). A character outside the Basic Multilingual Plane is never split in two.
 */
export function shorten(value: string): string {
  if (value.length <= MAX_ECHOED_CHARS) return value
  const end = MAX_ECHOED_CHARS - (isHighSurrogate(value.charCodeAt(MAX_ECHOED_CHARS - 1)) ? 1 : 0)
  return `${value.slice(0, end)}…`
}

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff
