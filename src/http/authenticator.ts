import { hashApiKey, isActive, looksLikeApiKey, type ApiKey, type Scope } from '../domain/api-keys.js'
import { ApiError } from '../errors.js'
import type { Store } from '../store/store.js'
import type { MaybePromise } from '../maybe-async.js'

const REALM = 'Bearer realm="petstore"'
// RFC 6750 §2.1: the scheme is case-insensitive; the credentials are a token68.
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i
const MAX_CACHED_KEYS = 10_000

interface CacheEntry {
  key: ApiKey | undefined
  fetchedAt: number
}

/**
 * Turns an Authorization header into an API key, or a 401/403 ApiError.
 *
 * Lookups are cached (found and not found alike) for `ttlMs`, so a busy key costs no database
 * round trip and no hashing: a cached key is answered at once, without a promise. A key revoked in
 * the database is refused by every instance within `ttlMs`. Expiry needs no lookup: it is checked
 * against the cached expiry on every request. The cache is keyed by the Authorization header as
 * sent, so a known client's request is not even parsed again; it lives only in this process's
 * memory, like the request that carried it, and is bounded in size.
 */
export class Authenticator {
  private readonly cache = new Map<string, CacheEntry>()
  private readonly inFlight = new Map<string, Promise<ApiKey | undefined>>()

  constructor(
    private readonly store: Store,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  authenticate(header: string | undefined, scope: Scope): MaybePromise<ApiKey> {
    const cached = header === undefined ? undefined : this.cache.get(header)
    if (cached !== undefined) {
      const now = this.now()
      if (now - cached.fetchedAt < this.ttlMs) return this.admit(cached.key, scope, now)
    }
    const token = bearerToken(header) // a 401 unless well-formed
    return this.lookup(header!, token).then((key) => this.admit(key, scope, this.now()))
  }

  private admit(key: ApiKey | undefined, scope: Scope, now: number): ApiKey {
    if (key === undefined) throw unauthorized('The API key is not known.')
    if (!isActive(key, now)) {
      throw unauthorized(key.revokedAt !== null ? 'The API key has been revoked.' : 'The API key has expired.')
    }
    if (!key.scopes.includes(scope)) {
      throw new ApiError('insufficient_scope', `The API key does not have the scope "${scope}".`, {
        'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
      })
    }
    return key
  }

  private async lookup(header: string, token: string): Promise<ApiKey | undefined> {
    let pending = this.inFlight.get(token)
    if (pending === undefined) {
      pending = this.store.apiKeys.findByHash(hashApiKey(token)).finally(() => this.inFlight.delete(token))
      this.inFlight.set(token, pending)
    }
    const key = await pending
    this.remember(header, key)
    return key
  }

  private remember(header: string, key: ApiKey | undefined): void {
    if (this.ttlMs === 0) return
    this.cache.delete(header) // re-insert at the end: the Map's order is the eviction order
    this.cache.set(header, { key, fetchedAt: this.now() })
    if (this.cache.size > MAX_CACHED_KEYS) this.cache.delete(this.cache.keys().next().value!)
  }
}

/** The token of a well-formed `Bearer` header, or a 401 saying what is wrong with it. */
function bearerToken(header: string | undefined): string {
  if (header === undefined || header === '') throw unauthorized(undefined)
  const match = BEARER.exec(header)
  if (match === null) {
    // Some other scheme (Basic, …) or no credentials: no bearer token was sent.
    throw /^bearer\b/i.test(header) ? unauthorized('The Authorization header is not "Bearer <API_KEY>".') : unauthorized(undefined)
  }
  const token = match[1]!
  if (!looksLikeApiKey(token)) throw unauthorized('The API key is malformed.')
  return token
}

function unauthorized(description: string | undefined): ApiError {
  // RFC 6750 §3: no error attribute when the request carried no bearer token at all.
  const challenge =
    description === undefined ? REALM : `${REALM}, error="invalid_token", error_description="${description}"`
  return new ApiError('unauthorized', description, { 'www-authenticate': challenge })
}
