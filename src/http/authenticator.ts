import { hashApiKey, isActive, looksLikeApiKey, type ApiKey, type Scope } from '../domain/api-keys.js'
import { ApiError } from '../errors.js'
import type { Store } from '../store/store.js'

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
 * Lookups are cached by key hash (found and not found alike) for `ttlMs`, so a busy key costs no
 * database round trip; a key revoked in the database is refused by every instance within `ttlMs`.
 * Expiry needs no lookup: it is checked against the cached expiry on every request.
 */
export class Authenticator {
  private readonly cache = new Map<string, CacheEntry>()
  private readonly inFlight = new Map<string, Promise<ApiKey | undefined>>()

  constructor(
    private readonly store: Store,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async authenticate(header: string | undefined, scope: Scope): Promise<ApiKey> {
    if (header === undefined || header === '') throw unauthorized(undefined)
    const match = BEARER.exec(header)
    if (match === null) {
      // Some other scheme (Basic, …) or no credentials: no bearer token was sent.
      throw /^bearer\b/i.test(header) ? unauthorized('The Authorization header is not "Bearer <API_KEY>".') : unauthorized(undefined)
    }
    const token = match[1]!
    if (!looksLikeApiKey(token)) throw unauthorized('The API key is malformed.')
    const key = await this.lookup(hashApiKey(token))
    if (key === undefined) throw unauthorized('The API key is not known.')
    if (!isActive(key, new Date(this.now()))) {
      throw unauthorized(key.revokedAt !== null ? 'The API key has been revoked.' : 'The API key has expired.')
    }
    if (!key.scopes.includes(scope)) {
      throw new ApiError('insufficient_scope', `The API key does not have the scope "${scope}".`, {
        'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
      })
    }
    return key
  }

  private async lookup(hash: string): Promise<ApiKey | undefined> {
    const cached = this.cache.get(hash)
    if (cached !== undefined && this.now() - cached.fetchedAt < this.ttlMs) return cached.key
    let pending = this.inFlight.get(hash)
    if (pending === undefined) {
      pending = this.store.findApiKeyByHash(hash).finally(() => this.inFlight.delete(hash))
      this.inFlight.set(hash, pending)
    }
    const key = await pending
    this.remember(hash, key)
    return key
  }

  private remember(hash: string, key: ApiKey | undefined): void {
    if (this.ttlMs === 0) return
    this.cache.delete(hash) // re-insert at the end: the Map's order is the eviction order
    this.cache.set(hash, { key, fetchedAt: this.now() })
    if (this.cache.size > MAX_CACHED_KEYS) this.cache.delete(this.cache.keys().next().value!)
  }
}

function unauthorized(description: string | undefined): ApiError {
  // RFC 6750 §3: no error attribute when the request carried no bearer token at all.
  const challenge =
    description === undefined ? REALM : `${REALM}, error="invalid_token", error_description="${description}"`
  return new ApiError('unauthorized', description, { 'www-authenticate': challenge })
}
