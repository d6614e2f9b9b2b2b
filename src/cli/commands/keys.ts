import { stringify as stringifyLossless } from 'lossless-json'
import { DEFAULT_SCOPES, DISPLAY_PREFIX_LENGTH, holdsKeySecret, parseDuration, parseScopes, SCOPES, type ApiKey, type Scope } from '../../domain/api-keys.js'
import { createKey } from '../../keys/create-key.js'
import { CommandError, oneLine, PROGRAM, printable, printRows, stringOption, UsageError, withStore, written, type Command } from '../command.js'

const MAX_KEY_NAME_LENGTH = 100

function validName(name: string | undefined): string {
  if (name === undefined) throw new UsageError('missing --name (a name for the key, e.g. the client that will use it)')
  // eslint-disable-next-line no-control-regex
  if (name.trim() === '' || [...name].length > MAX_KEY_NAME_LENGTH || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new UsageError(`--name must be 1 to ${MAX_KEY_NAME_LENGTH} characters, not blank, without control characters`)
  }
  return name
}

export const keysCreate: Command = {
  name: ['keys', 'create'],
  synopsis: 'keys create --name NAME',
  summary: 'create an API key and print it (shown only this once)',
  options: { name: { type: 'string' }, scopes: { type: 'string' }, 'expires-in': { type: 'string' } },
  help: `Usage: ${PROGRAM} keys create --name NAME [--scopes SCOPES] [--expires-in DURATION]

Creates an API key and prints the key, alone on one line, on stdout; everything else goes to
stderr. The key is shown only this once: the database keeps its SHA-256 hash and its display
prefix (what 'keys list' shows and 'keys revoke' accepts).

Options:
  --name NAME              what the key is for, 1 to ${MAX_KEY_NAME_LENGTH} characters (required)
  --scopes SCOPES          comma-separated, from ${SCOPES.join(', ')}
                           (default: ${DEFAULT_SCOPES.join(', ')}; orders:write,
                           which places, ships and completes orders, only when named)
  --expires-in DURATION    the key stops working after this long: 45s, 90m, 12h, 30d, 2w
                           (default: never)
  -h, --help               show this help

Examples:
  ${PROGRAM} keys create --name billing-service
  ${PROGRAM} keys create --name dashboard --scopes orders:read --expires-in 30d
  KEY=$(${PROGRAM} keys create --name ci --expires-in 12h)`,
  async run({ values }, io) {
    const name = validName(stringOption(values, 'name'))
    let scopes: Scope[] | undefined
    let expiresAt: Date | null = null
    try {
      const scopesText = stringOption(values, 'scopes')
      if (scopesText !== undefined) scopes = parseScopes(scopesText)
      const expiresIn = stringOption(values, 'expires-in')
      if (expiresIn !== undefined) {
        expiresAt = new Date(Date.now() + parseDuration(expiresIn))
        // The dates the service stores and shows end with the year 9999 (PostgreSQL would refuse it).
        if (!(expiresAt.getUTCFullYear() <= 9999)) throw new Error(`invalid --expires-in "${expiresIn}": it would end after the year 9999`)
      }
    } catch (error) {
      throw new UsageError((error as Error).message.replace(/^invalid duration/, 'invalid --expires-in'))
    }
    // The key is printed before it is stored: a key whose secret cannot be written (a full disk, a
    // closed pipe) is never made, where one stored first would be a working key nobody holds.
    let printed = false
    const { key } = await withStore(io, (store) =>
      createKey(store.apiKeys, { name, scopes, expiresAt }, async (secret) => {
        await written(io.stdout, `${secret}\n`)
        printed = true
      }),
    ).catch((error: unknown) => {
      if (!printed) throw error
      throw new CommandError(`${oneLine((error as Error).message)}; the key printed above was not created`, { cause: error })
    })
    io.stderr.write(
      `created key ${key.id} "${printable(key.name)}" (${key.displayPrefix}), scopes ${key.scopes.join(',')}, ` +
        `${key.expiresAt === null ? 'never expires' : `expires ${key.expiresAt.toISOString()}`}; ` +
        'store it now: it cannot be shown again\n',
    )
  },
}

const COLUMNS = ['ID', 'NAME', 'PREFIX', 'SCOPES', 'CREATED', 'EXPIRES', 'REVOKED'] as const

function keyColumns(key: ApiKey): string[] {
  const date = (value: Date | null): string => (value === null ? '-' : value.toISOString())
  return [
    String(key.id),
    printable(key.name),
    key.displayPrefix,
    key.scopes.join(','),
    date(key.createdAt),
    date(key.expiresAt),
    date(key.revokedAt),
  ]
}

/** The JSON of `keys list --json`: ids as exact integer literals, dates ISO 8601; never the secret or its hash. */
function keysToJson(keys: ApiKey[]): string {
  return stringifyLossless(
    keys.map(({ id, name, displayPrefix, scopes, createdAt, expiresAt, revokedAt }) => ({ id, name, displayPrefix, scopes, createdAt, expiresAt, revokedAt })),
  )!
}

export const keysList: Command = {
  name: ['keys', 'list'],
  synopsis: 'keys list',
  summary: 'list API keys (never their secrets)',
  options: { json: { type: 'boolean' } },
  help: `Usage: ${PROGRAM} keys list [--json]

Lists every API key, oldest first, one a line: id, name, display prefix, scopes, created,
expires, revoked (ISO 8601 dates in UTC, "-" for none). The key itself is never shown: it is not
stored. On a terminal the columns are aligned under a header; piped, they are separated by tabs
with no header, for cut/awk.

Options:
  --json       print a JSON array of {id, name, displayPrefix, scopes, createdAt, expiresAt,
               revokedAt} instead (dates ISO 8601 or null)
  -h, --help   show this help

Examples:
  ${PROGRAM} keys list
  ${PROGRAM} keys list | awk -F'\\t' '$7 == "-" { print $1, $2 }'   # keys not revoked
  ${PROGRAM} keys list --json`,
  async run({ values }, io) {
    const keys = await withStore(io, (store) => store.apiKeys.list())
    if (values.json === true) {
      io.stdout.write(`${keysToJson(keys)}\n`)
      return
    }
    printRows(io, COLUMNS, keys.map(keyColumns), `no API keys yet; create one with '${PROGRAM} keys create --name NAME'`)
  },
}

/** What `keys revoke` takes, for a person who gave it something else (a name, a whole key). */
const REVOKE_TAKES = `keys revoke takes a key's id or its display prefix (pso_ and 8 characters), as 'keys list' shows them`
const WHOLE_KEY = `that holds a whole API key (or more of one than its display prefix), not its display prefix: ${REVOKE_TAKES} (a key's first ${DISPLAY_PREFIX_LENGTH} characters); the key is not repeated here`

/**
 * Why nothing was revoked, and what to give instead: when keys have `target` as their name (names
 * are not unique), their ids.
 */
function noKeyRevoked(target: string, named: ApiKey[]): string {
  const what = /^[0-9]{1,19}$/.test(target) ? 'id' : 'display prefix'
  const shown = JSON.stringify(printable(target))
  let message = `no API key has the ${what} ${shown}; ${REVOKE_TAKES}`
  if (named.length === 1) message += `; the key named ${shown} has the id ${named[0]!.id}`
  else if (named.length > 1) message += `; the keys named ${shown} have the ids ${named.map((key) => key.id).join(', ')}`
  return message
}

export const keysRevoke: Command = {
  name: ['keys', 'revoke'],
  synopsis: 'keys revoke ID',
  summary: 'revoke an API key by id or display prefix',
  positionals: [{ name: 'ID', describe: "the key's id or display prefix, as 'keys list' shows them" }],
  help: `Usage: ${PROGRAM} keys revoke ID

Revokes an API key: requests with it are refused (401) from then on — by every server within
its key cache time (KEY_CACHE_TTL_MS, 2 seconds by default). ID is the numeric id or the display
prefix (pso_ and 8 characters) that 'keys list' shows, never the key's name (names are not unique:
given a name, the error lists the ids of the keys that have it). Revoking a revoked key changes
nothing and succeeds; an unknown ID fails.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} keys revoke 3
  ${PROGRAM} keys revoke pso_4fQx9LmZ`,
  async run({ positionals }, io) {
    const target = positionals[0]!
    if (target.trim() === '') throw new UsageError('ID must be a key id or display prefix')
    // A whole key, or one pasted with more around it ("Bearer …", a space, a CR): never repeated.
    if (holdsKeySecret(target)) throw new CommandError(WHOLE_KEY)
    const message = await withStore(io, async (store) => {
      const revoked = await store.apiKeys.revoke(target)
      if (revoked === undefined) throw new CommandError(noKeyRevoked(target, (await store.apiKeys.list()).filter((key) => key.name === target)))
      const { key, alreadyRevoked } = revoked
      const what = `key ${key.id} "${printable(key.name)}" (${key.displayPrefix})`
      return alreadyRevoked ? `${what} was already revoked at ${key.revokedAt!.toISOString()}` : `revoked ${what}`
    })
    io.stdout.write(`${message}\n`)
  },
}
