import type { ApiKey, NewApiKey } from '../../domain/api-keys.js'
import { INT64_MAX } from '../../domain/int64.js'
import { KEY_COLUMNS, toApiKey, type KeyRow } from '../rows.js'
import type { ApiKeysRepository, RevokedKey } from '../store.js'
import type { PostgresDatabase } from './database.js'
import { int8 } from './parameters.js'

export class PostgresApiKeysRepository implements ApiKeysRepository {
  constructor(private readonly database: PostgresDatabase) {}

  async create(key: NewApiKey): Promise<ApiKey> {
    const { rows } = await this.database.execute<KeyRow>(
      `INSERT INTO api_keys (name, hash, display_prefix, scopes, expires_at)
       VALUES ($1, $2, $3, $4::text[], $5) RETURNING ${KEY_COLUMNS}`,
      [key.name, key.hash, key.displayPrefix, key.scopes, key.expiresAt?.toISOString() ?? null],
    )
    return toApiKey(rows[0]!)
  }

  async findByHash(hash: string): Promise<ApiKey | undefined> {
    const { rows } = await this.database.read<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE hash = $1`, [hash])
    return rows[0] === undefined ? undefined : toApiKey(rows[0])
  }

  async list(): Promise<ApiKey[]> {
    const { rows } = await this.database.read<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY id`)
    return rows.map(toApiKey)
  }

  async revoke(idOrPrefix: string): Promise<RevokedKey | undefined> {
    const byId = /^[0-9]{1,19}$/.test(idOrPrefix)
    // A number past int64 cannot be the id of any key.
    if (byId && BigInt(idOrPrefix) > INT64_MAX) return undefined
    return this.database.transaction(async (connection) => {
      const { rows: matches } = byId
        ? await connection.query<{ id: bigint; revoked: boolean }>('SELECT id, revoked_at IS NOT NULL AS revoked FROM api_keys WHERE id = $1 FOR UPDATE', [idOrPrefix])
        : await connection.query<{ id: bigint; revoked: boolean }>(
            'SELECT id, revoked_at IS NOT NULL AS revoked FROM api_keys WHERE display_prefix = $1 FOR UPDATE',
            [idOrPrefix],
          )
      if (matches.length > 1) throw new Error(`"${idOrPrefix}" matches ${matches.length} keys; revoke by id`)
      const match = matches[0]
      if (match === undefined) return undefined
      const { rows } = await connection.query<KeyRow>(
        `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
        [int8(match.id)],
      )
      return { key: toApiKey(rows[0]!), alreadyRevoked: match.revoked }
    })
  }
}
