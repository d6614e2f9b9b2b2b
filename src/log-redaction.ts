import pino from 'pino'

/** What a query parameter's value becomes in a log line. */
const REDACTED_VALUE = '[redacted]'

// A query string, in a URL or in text that holds one (an error's message): from a `?` that follows
// a non-space character up to a space, a quote or a `#`. A `?` ending a sentence has none.
const QUERY = /(?<=\S)\?([^\s"'<>`#]+)/g

/**
 * A URL, or any text with URLs in it, with the value of every query parameter replaced by
 * `[redacted]` (`/v2/store/orders?status=[redacted]&cursor=[redacted]`): a client may put a key, a
 * cursor or a customer's data in a query string, and log lines are read by many and kept long. The
 * names stay, to show what was asked; a member without `=` is all value (`?pso_…`), and goes.
 */
export function withoutQueryValues(text: string): string {
  if (!text.includes('?')) return text // the usual request, at the cost of one scan
  return text.replace(QUERY, (_match, query: string) => `?${query.split('&').map(redactMember).join('&')}`)
}

function redactMember(member: string): string {
  if (member === '') return member
  const equals = member.indexOf('=')
  return equals === -1 ? REDACTED_VALUE : `${member.slice(0, equals + 1)}${REDACTED_VALUE}`
}

const redactText = (value: unknown): unknown => (typeof value === 'string' ? withoutQueryValues(value) : value)

/**
 * The server logger's part in it: whatever a line holds that may be a request URL — the access
 * line's `url`, a refusal's `reason` (Fastify's messages quote the URL: `'/v1/%?k=…' is not a valid
 * url component`), an error's message and stack, a request object, the message text itself (some of
 * Fastify's warnings name the URL) — without query values, whoever logs it.
 */
export const queryValuesRedacted: Pick<pino.LoggerOptions, 'serializers' | 'hooks'> = {
  serializers: {
    url: redactText,
    reason: redactText,
    err: (error: Error) => {
      const serialized = pino.stdSerializers.err(error)
      return { ...serialized, message: withoutQueryValues(serialized.message), stack: withoutQueryValues(serialized.stack) }
    },
    req: (request: { method?: unknown; url?: unknown }) => ({ method: request.method, url: redactText(request.url) }),
  },
  hooks: {
    logMethod(args, method) {
      method.apply(this, args.map(redactText) as Parameters<typeof method>)
    },
  },
}
