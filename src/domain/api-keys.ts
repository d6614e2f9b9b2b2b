import { createHash, randomInt } from 'node:crypto'

export const SCOPES = ['orders:read', 'orders:cancel', 'orders:write', 'pets:read', 'webhooks:manage'] as const
export type Scope = (typeof SCOPES)[number]
/** A new key's scopes unless told otherwise: every scope but `orders:write` (placing, shipping, completing) and `webhooks:manage`. */
export const DEFAULT_SCOPES: readonly Scope[] = ['orders:read', 'orders:cancel', 'pets:read']

const KEY_PREFIX = 'pso_'
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const SECRET_LENGTH = 40 // 40 base62 characters ≈ 238 bits
// What `keys list` shows and `keys revoke` accepts: the prefix plus the first characters of the secret.
export const DISPLAY_PREFIX_LENGTH = KEY_PREFIX.length + 8
const KEY_FORMAT = /^pso_[0-9A-Za-z]{32,128}$/

export interface ApiKey {
  id: bigint
  name: string
  displayPrefix: string
  scopes: Scope[]
  createdAt: Date
  expiresAt: Date | null
  revokedAt: Date | null
}

export interface NewApiKey {
  name: string
  hash: string
  displayPrefix: string
  scopes: Scope[]
  expiresAt: Date | null
}

/** A fresh key. `secret` is shown once and never stored; the store keeps `hash` and `displayPrefix`. */
export function generateApiKey(): { secret: string; hash: string; displayPrefix: string } {
  let secret = KEY_PREFIX
  // randomInt draws without modulo bias from the CSPRNG.
  for (let i = 0; i < SECRET_LENGTH; i++) secret += BASE62[randomInt(BASE62.length)]
  return { secret, hash: hashApiKey(secret), displayPrefix: secret.slice(0, DISPLAY_PREFIX_LENGTH) }
}

export function hashApiKey(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

/** Whether a presented token can be a key at all; anything else is refused before any lookup. */
export function looksLikeApiKey(token: string): boolean {
  return KEY_FORMAT.test(token)
}

/** More of a key than its display prefix shows, anywhere in `text` (`Bearer pso_…`, a key with a space or CR after it). */
const MORE_THAN_DISPLAY_PREFIX = new RegExp(`${KEY_PREFIX}[0-9A-Za-z]{${DISPLAY_PREFIX_LENGTH - KEY_PREFIX.length + 1},}`)

/** Whether `text` holds more of a key's secret than its display prefix: such text is never repeated in a message. */
export function holdsKeySecret(text: string): boolean {
  return MORE_THAN_DISPLAY_PREFIX.test(text)
}

/** What a key looks like, for a message to someone whose key was refused: the prefix and the length, never the key. */
export const API_KEY_SHAPE = `a key is ${KEY_PREFIX} followed by ${SECRET_LENGTH} letters and digits, ${KEY_PREFIX.length + SECRET_LENGTH} characters in all`

/**
 * Why `token` cannot be a key this service made, in words that repeat nothing of it (its length
 * only): undefined when it has a made key's shape. A key cut short by a copy is the usual case.
 */
export function keyShapeProblem(token: string): string | undefined {
  if (!token.startsWith(KEY_PREFIX)) return `${API_KEY_SHAPE}; this one does not start with ${KEY_PREFIX}`
  if (token.length !== KEY_PREFIX.length + SECRET_LENGTH) return `${API_KEY_SHAPE}; this one has ${token.length}`
  if (!/^pso_[0-9A-Za-z]+$/.test(token)) return `${API_KEY_SHAPE}; this one has other characters`
  return undefined
}

/** Not revoked, and not expired at `nowMs` (milliseconds since the epoch). */
export function isActive(key: ApiKey, nowMs: number): boolean {
  return key.revokedAt === null && (key.expiresAt === null || key.expiresAt.getTime() > nowMs)
}

export function parseScopes(text: string): Scope[] {
  const scopes = text.split(',').map((s) => s.trim()).filter((s) => s !== '')
  if (scopes.length === 0) throw new Error('--scopes must name at least one scope')
  for (const scope of scopes) {
    if (!(SCOPES as readonly string[]).includes(scope)) {
      throw new Error(`unknown scope "${scope}" (known: ${SCOPES.join(', ')})`)
    }
  }
  return [...new Set(scopes)] as Scope[]
}

const DURATION = /^([1-9][0-9]{0,5})([smhdw])$/
const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const

/** "30d", "12h", "90m", "2w", "45s" → milliseconds. */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text)
  if (match === null) throw new Error(`invalid duration "${text}" (use a whole number from 1 to 999999 and a unit: 45s, 90m, 12h, 30d, 2w)`)
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]
}
