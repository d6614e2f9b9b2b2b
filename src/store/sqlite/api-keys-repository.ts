import type { ApiKey, NewApiKey, Scope } from '../../domain/api-keys.js'
import { parseInt64 } from '../../domain/int64.js'
import type { ApiKeysRepository, RevokedKey } from '../store.js'
import { classify, type SqliteDatabase } from './database.js'

/** A row of api_keys (the hash is never read back). */
interface KeyRow {
  id: bigint
  name: string
  display_prefix: string
  scopes: string
  created_at: string
  expires_at: string | null
  revoked_at: string | null
}

const KEY_COLUMNS = 'id, name, display_prefix, scopes, created_at, expires_at, revoked_at'

function rowToKey(row: KeyRow): ApiKey {
  return {
    id: row.id,
    name: row.name,
    displayPrefix: row.display_prefix,
    scopes: row.scopes.split(',') as Scope[],
    createdAt: new Date(row.created_at),
    expiresAt: row.expires_at === null ? null : new Date(row.expires_at),
    revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at),
  }
}

export class SqliteApiKeysRepository implements ApiKeysRepository {
  constructor(private readonly database: SqliteDatabase) {}

  async create(key: NewApiKey): Promise<ApiKey> {
    try {
      const row = this.database.db
        .prepare(
          `INSERT INTO api_keys (name, hash, display_prefix, scopes, created_at, expires_at)
           VALUES (?, ?, ?, ?, ?, ?) RETURNING ${KEY_COLUMNS}`,
        )
        .get(key.name, key.hash, key.displayPrefix, key.scopes.join(','), new Date().toISOString(), key.expiresAt?.toISOString() ?? null) as KeyRow
      return rowToKey(row)
    } catch (error) {
      classify(error)
    }
  }

  async findByHash(hash: string): Promise<ApiKey | undefined> {
    try {
      const row = this.database.db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE hash = ?`).get(hash) as KeyRow | undefined
      return row === undefined ? undefined : rowToKey(row)
    } catch (error) {
      classify(error)
    }
  }

  async list(): Promise<ApiKey[]> {
    try {
      return (this.database.db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY id`).all() as KeyRow[]).map(rowToKey)
    } catch (error) {
      classify(error)
    }
  }

  async revoke(idOrPrefix: string): Promise<RevokedKey | undefined> {
    const db = this.database.db
    return this.database.immediate((): RevokedKey | undefined => {
      // Digits are an id (one beyond int64 matches no key); anything else is a display prefix.
      const id = /^[0-9]+$/.test(idOrPrefix) ? (parseInt64(idOrPrefix) ?? null) : undefined
      const matches = (
        id !== undefined
          ? db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`).all(id)
          : db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE display_prefix = ?`).all(idOrPrefix)
      ) as KeyRow[]
      if (matches.length > 1) throw new Error(`"${idOrPrefix}" matches ${matches.length} keys; revoke by id`)
      const match = matches[0]
      if (match === undefined) return undefined
      const row = db
        .prepare(`UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ? RETURNING ${KEY_COLUMNS}`)
        .get(new Date().toISOString(), match.id) as KeyRow
      return { key: rowToKey(row), alreadyRevoked: match.revoked_at !== null }
    })
  }
}
