import type { ApiKey, NewApiKey } from '../../domain/api-keys.js'
import { parseInt64 } from '../../domain/int64.js'
import { KEY_COLUMNS, toApiKey, type KeyRow } from '../rows.js'
import type { ApiKeysRepository, RevokedKey } from '../store.js'
import { classified, type SqliteDatabase } from './database.js'

export class SqliteApiKeysRepository implements ApiKeysRepository {
  constructor(private readonly database: SqliteDatabase) {}

  async create(key: NewApiKey): Promise<ApiKey> {
    const row = classified(
      () =>
        this.database.db
          .prepare(
            `INSERT INTO api_keys (name, hash, display_prefix, scopes, created_at, expires_at)
             VALUES (?, ?, ?, ?, ?, ?) RETURNING ${KEY_COLUMNS}`,
          )
          .get(key.name, key.hash, key.displayPrefix, key.scopes.join(','), new Date().toISOString(), key.expiresAt?.toISOString() ?? null) as KeyRow,
    )
    return toApiKey(row)
  }

  async findByHash(hash: string): Promise<ApiKey | undefined> {
    const row = classified(() => this.database.db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE hash = ?`).get(hash) as KeyRow | undefined)
    return row === undefined ? undefined : toApiKey(row)
  }

  async list(): Promise<ApiKey[]> {
    return classified(() => this.database.db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY id`).all() as KeyRow[]).map(toApiKey)
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
      return { key: toApiKey(row), alreadyRevoked: match.revoked_at !== null }
    })
  }
}
