import type { ApiKeysRepository } from '../store/store.js'
import { DEFAULT_SCOPES, generateApiKey, type ApiKey, type Scope } from '../domain/api-keys.js'

/** Creates a key; the secret is returned once and never stored (the store keeps its SHA-256 hash). */
export async function createKey(
  keys: ApiKeysRepository,
  options: { name: string; scopes?: Scope[]; expiresAt?: Date | null },
): Promise<{ key: ApiKey; secret: string }> {
  const generated = generateApiKey()
  const key = await keys.create({
    name: options.name,
    hash: generated.hash,
    displayPrefix: generated.displayPrefix,
    scopes: options.scopes ?? [...DEFAULT_SCOPES],
    expiresAt: options.expiresAt ?? null,
  })
  return { key, secret: generated.secret }
}
