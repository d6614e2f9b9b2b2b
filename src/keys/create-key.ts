import type { ApiKeysRepository } from '../store/store.js'
import { DEFAULT_SCOPES, generateApiKey, type ApiKey, type Scope } from '../domain/api-keys.js'

/**
 * Creates a key; the secret is returned once and never stored (the store keeps its SHA-256 hash).
 * `show`, when given, is handed the secret before the key is stored: if it throws, no key is made.
 */
export async function createKey(
  keys: ApiKeysRepository,
  options: { name: string; scopes?: Scope[]; expiresAt?: Date | null },
  show?: (secret: string) => Promise<void>,
): Promise<{ key: ApiKey; secret: string }> {
  const generated = generateApiKey()
  await show?.(generated.secret)
  const key = await keys.create({
    name: options.name,
    hash: generated.hash,
    displayPrefix: generated.displayPrefix,
    scopes: options.scopes ?? [...DEFAULT_SCOPES],
    expiresAt: options.expiresAt ?? null,
  })
  return { key, secret: generated.secret }
}
