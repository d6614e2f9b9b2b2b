/** What a redacted credential is replaced by. */
const REDACTED = '***'

// `scheme://userinfo@`: the userinfo runs to the last `@` of the word, so a password holding an
// unescaped `@` or `/` is still covered (a path with an `@` in it is over-redacted, never under).
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s"'<>`]*)@/gi
// Query parameters that carry a credential (libpq's `password` and `sslpassword`, tokens, keys).
const SECRET_PARAM = /([?&](?:[a-z_]*pass(?:word)?|pwd|secret|[a-z_]*token|[a-z_]*key|auth)=)[^&#\s"'<>`]*/gi

/**
 * A URL — or any text with URLs in it, such as an error message — with its credentials replaced
 * by `***`: the password of `scheme://user:password@host` (the user name stays: it helps and is
 * not a secret) and the value of a query parameter such as `?password=` or `?sslkey=`. Works on
 * text that is not a valid URL too: a value refused by the configuration is shown redacted.
 * Everything else is left as written.
 */
export function redactUrl(text: string): string {
  return text
    .replace(USERINFO, (_match, scheme: string, userinfo: string) => {
      const colon = userinfo.indexOf(':')
      return `${scheme}${colon === -1 ? userinfo : `${userinfo.slice(0, colon)}:${REDACTED}`}@`
    })
    .replace(SECRET_PARAM, `$1${REDACTED}`)
}

/**
 * A URL to name where something goes, with nothing of it that may be a credential: its user,
 * password, query and fragment are left out (an OTLP endpoint's query may carry a collector's key).
 */
export function withoutCredentials(url: string): string {
  const parsed = new URL(url)
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}`
}
