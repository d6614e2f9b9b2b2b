import { performance } from 'node:perf_hooks'
import { API_KEY_SHAPE, hashApiKey, isActive, keyShapeProblem, looksLikeApiKey, type ApiKey, type Scope } from '../domain/api-keys.js'
import { ApiError } from '../errors.js'
import { keyCounter } from './rate-limiter.js'

const REALM = 'Bearer realm="petstore"'
// RFC 6750 §2.1: the scheme is case-insensitive; the credentials are a token68.
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i
const MAX_CACHED_KEYS = 10_000

/** Reads a key by the hash of its secret (the store's lookup). */
export type FindApiKey = (hash: string) => Promise<ApiKey | undefined>

export interface KnownKey {
  key: ApiKey
  /** Its counter in the per-key rate limit. */
  counter: string
  /** When it was read, on the monotonic clock. */
  fetchedAt: number
}

/**
 * API keys by the token presented, for `ttlMs`, so a busy key costs no database round trip and no
 * hashing. Only keys found in the store are kept (revoked and expired ones too, so that their
 * client does not cause a lookup per request): an unknown token takes no room, so the cache is
 * bounded by the keys that exist, and by MAX_CACHED_KEYS. A key revoked in the database is refused
 * by every instance within `ttlMs`, measured on the monotonic clock `now` (a wall clock stepped back
 * would stretch it); expiry is checked against the wall clock `wallNow` on every request.
 */
export class Authenticator {
  private readonly cache = new Map<string, KnownKey>()
  private readonly inFlight = new Map<string, Promise<KnownKey | undefined>>()

  constructor(
    private readonly findApiKey: FindApiKey,
    private readonly ttlMs: number,
    private readonly now: () => number = () => performance.now(),
    private readonly wallNow: () => number = Date.now,
  ) {}

  /** The token of a well-formed `Bearer` header, or a 401 saying what is wrong with it. */
  token(header: string | undefined): string {
    // The usual spelling, `Bearer <token>`, is taken as it is: a token of another shape is simply
    // not in the cache, and is then parsed in full.
    if (header !== undefined && header.startsWith('Bearer ') && header.charCodeAt(7) !== 32) {
      const token = header.slice(7)
      if (this.cache.has(token)) return token
    }
    return bearerToken(header)
  }

  /** A key this instance has found by this token: fresh, or due to be read again (`isFresh`). */
  known(token: string): KnownKey | undefined {
    return this.cache.get(token)
  }

  isFresh(known: KnownKey): boolean {
    return this.now() - known.fetchedAt < this.ttlMs
  }

  /** Reads the token's key from the store (one read at a time per token: requests that arrive with it meanwhile share it), and caches it if found. */
  lookup(token: string): Promise<KnownKey | undefined> {
    let pending = this.inFlight.get(token)
    if (pending === undefined) {
      pending = this.findApiKey(hashApiKey(token))
        .then((key) => this.remember(token, key))
        .finally(() => this.inFlight.delete(token))
      this.inFlight.set(token, pending)
    }
    return pending
  }

  /** The 401 of `token`, which no key has: with the shape of a key when it has another (a key cut short). */
  unknown(token: string): ApiError {
    return unknownKey(token)
  }

  /**
   * The key if it is active and has every one of `scopes`; else a 401, or a 403 naming the scopes it
   * lacks. `token`: the one looked up, whose shape a 401 for an unknown key describes.
   */
  admit(known: KnownKey | undefined, scopes: readonly Scope[], token?: string): ApiKey {
    if (known === undefined) throw unknownKey(token)
    const key = known.key
    if (!isActive(key, this.wallNow())) {
      throw key.revokedAt !== null ? unauthorized('The API key has been revoked.') : keyExpired()
    }
    for (const scope of scopes) {
      if (!key.scopes.includes(scope)) throw insufficientScope(scopes.filter((needed) => !key.scopes.includes(needed)))
    }
    return key
  }

  /**
   * The key of a request held for a while (a long poll), checked again as it wakes: read from the
   * store again once its cache entry is stale, so a key revoked during the hold is refused within
   * `ttlMs` as on any request; revoked or expired: 401.
   */
  async recheck(header: string | undefined, scope: Scope): Promise<ApiKey> {
    const token = this.token(header)
    const known = this.known(token)
    return this.admit(known !== undefined && this.isFresh(known) ? known : await this.lookup(token), [scope], token)
  }

  private remember(token: string, key: ApiKey | undefined): KnownKey | undefined {
    this.cache.delete(token) // re-inserted at the end: the Map's order is the eviction order
    if (key === undefined) return undefined
    const known = { key, counter: keyCounter(key.id), fetchedAt: this.now() }
    this.cache.set(token, known)
    if (this.cache.size > MAX_CACHED_KEYS) this.cache.delete(this.cache.keys().next().value!)
    return known
  }
}

function bearerToken(header: string | undefined): string {
  if (header === undefined || header === '') throw unauthorized(undefined)
  const match = BEARER.exec(header)
  if (match === null) {
    // Some other scheme (Basic, …) or no credentials: no bearer token was sent.
    throw /^bearer\b/i.test(header) ? unauthorized('The Authorization header is not "Bearer <API_KEY>".') : unauthorized(undefined)
  }
  const token = match[1]!
  if (!looksLikeApiKey(token)) throw unauthorized(`The API key is malformed: ${keyShapeProblem(token) ?? API_KEY_SHAPE}.`)
  return token
}

/** The 401 of a token no key has: with the shape of a key when it has another (a key cut short). */
function unknownKey(token: string | undefined): ApiError {
  const problem = token === undefined ? undefined : keyShapeProblem(token)
  return unauthorized(problem === undefined ? 'The API key is not known.' : `The API key is not known: ${problem}.`)
}

/**
 * The 403 of a key that lacks `missing` (one scope or more, in the order the operation lists them):
 * the message and the challenge (RFC 6750 §3.1, a space-separated list) name every one, so a client
 * learns at once all that the key needs.
 */
export function insufficientScope(missing: readonly Scope[]): ApiError {
  const named = missing.map((scope) => `"${scope}"`)
  const message =
    named.length === 1
      ? `The API key does not have the scope ${named[0]}.`
      : `The API key does not have the scopes ${named.slice(0, -1).join(', ')} and ${named.at(-1)}.`
  return new ApiError('insufficient_scope', message, {
    'www-authenticate': `${REALM}, error="insufficient_scope", scope="${missing.join(' ')}"`,
  })
}

/** The 401 of a key that expired while its request was held. */
export function keyExpired(): ApiError {
  return unauthorized('The API key has expired.')
}

function unauthorized(description: string | undefined): ApiError {
  // RFC 6750 §3: no error attribute when the request carried no bearer token at all; and no `"` or
  // `\` in error_description, whose quoted string would end there (the body's message keeps them).
  const challenge =
    description === undefined ? REALM : `${REALM}, error="invalid_token", error_description="${description.replace(/["\\]/g, "'")}"`
  return new ApiError('unauthorized', description, { 'www-authenticate': challenge })
}
