import { KNOWN_VARIABLES, RETIRED_SETTINGS, SECRET_SETTINGS } from './config.js'

/**
 * The prefixes of this service's own groups of settings: a variable that starts with one and is
 * not a setting is a mistake. Not OTEL_ (the SDK reads many more variables than the configuration
 * does, and an operator may set others for other signals), and not the words of one setting alone
 * (HOST, PORT, LOG_), which other programs use: their near misses are caught by distance.
 */
export const SETTING_PREFIXES = ['PETSTORE_', 'DATABASE_', 'REDIS_', 'HTTP_', 'LIST_', 'PETS_', 'EVENTS_', 'IDEMPOTENCY_', 'WEBHOOK', 'RATE_LIMIT_', 'KEY_CACHE_']

/**
 * Standard variables that share a prefix with ours, and PETSTORE_API_KEY: the key the client's
 * examples (docs/client.md) read, set in the same shell as the CLI's commands.
 */
const STANDARD = new Set(['HTTP_PROXY', 'PETSTORE_API_KEY'])

/**
 * What Kubernetes sets in every container for every service of its namespace (for a service named
 * redis: REDIS_SERVICE_HOST, REDIS_SERVICE_PORT, REDIS_SERVICE_PORT_<NAME>, REDIS_PORT,
 * REDIS_PORT_6379_TCP and its _PROTO, _PORT and _ADDR), as Docker's links did before it.
 */
const SERVICE_VARIABLE = /^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$/

export interface UnknownVariable {
  name: string
  /** What it may have been meant as, when something is likely: `did you mean DATABASE_URL?`. */
  hint: string | undefined
}

/**
 * The variables of `env` that look like settings of this service but are not: one of its prefixes,
 * a near miss of a setting's name (a letter or two wrong, transposed or in the wrong case), or the
 * `_FILE` form of a setting that is not a secret. By name, in order; a value is never looked at.
 */
export function unknownVariables(env: Record<string, string | undefined>): UnknownVariable[] {
  const unknown: UnknownVariable[] = []
  for (const name of Object.keys(env).sort()) {
    if (env[name] === undefined || KNOWN_VARIABLES.has(name) || STANDARD.has(name) || SERVICE_VARIABLE.test(name)) continue
    const hint = hintFor(name)
    if (hint !== undefined || SETTING_PREFIXES.some((prefix) => name.startsWith(prefix))) unknown.push({ name, hint })
  }
  return unknown
}

/** The warning about one unknown variable, naming it and nothing of its value. */
export function unknownVariableWarning({ name, hint }: UnknownVariable): string {
  return `${name} is not a setting of this service${hint === undefined ? '' : `; ${hint}`}`
}

function hintFor(name: string): string | undefined {
  if (Object.hasOwn(RETIRED_SETTINGS, name)) return `did you mean ${RETIRED_SETTINGS[name]}?`
  if (name.endsWith('_FILE') && KNOWN_VARIABLES.has(name.slice(0, -'_FILE'.length))) {
    return `only ${SECRET_SETTINGS.join(', ')} can be given as a file`
  }
  let nearest: { name: string; distance: number } | undefined
  for (const known of KNOWN_VARIABLES) {
    const distance = editDistance(name.toUpperCase(), known, allowedEdits(known))
    if (distance <= allowedEdits(known) && (nearest === undefined || distance < nearest.distance)) nearest = { name: known, distance }
  }
  return nearest === undefined ? undefined : `did you mean ${nearest.name}?`
}

/**
 * How many letters may be wrong for a name to be taken for `known`: none in a name of four letters
 * or fewer (HOME, TERM and PGHOST are not HOST; host is), one up to eight (LOGNAME is not
 * LOG_LEVEL), two up to fifteen, three beyond.
 */
function allowedEdits(known: string): number {
  return known.length <= 4 ? 0 : known.length <= 8 ? 1 : known.length <= 15 ? 2 : 3
}

/**
 * Letters inserted, deleted, replaced or two neighbours swapped to make `a` into `b` (the optimal
 * string alignment distance); anything over `limit` is `limit + 1` (told at once by the lengths).
 */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1
  let before: number[] = []
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, before[j - 2]! + 1)
      current.push(best)
    }
    before = previous
    previous = current
  }
  return Math.min(previous[b.length]!, limit + 1)
}
