import type { Pet } from '../../schemas/pet.js'
import { toPet, type PetRow } from '../rows.js'
import type { ImportProgress, PetsRepository } from '../store.js'
import { classified, type SqliteDatabase } from './database.js'

export class SqlitePetsRepository implements PetsRepository {
  constructor(private readonly database: SqliteDatabase) {}

  async find(id: bigint): Promise<Pet | undefined> {
    const row = classified(() => this.database.db.prepare('SELECT id, name, tag FROM pets WHERE id = ?').get(id) as PetRow | undefined)
    return row === undefined ? undefined : toPet(row)
  }

  async import(records: AsyncIterable<Pet>, onProgress?: ImportProgress): Promise<number> {
    const upsert = this.database.db.prepare(`
      INSERT INTO pets (id, name, tag) VALUES (@id, @name, @tag)
      ON CONFLICT (id) DO UPDATE SET name = excluded.name, tag = excluded.tag`)
    return this.database.inTransaction(async () => {
      let count = 0
      for await (const pet of records) {
        upsert.run({ id: pet.id, name: pet.name, tag: pet.tag ?? null })
        count++
        if (onProgress !== undefined && count % 10_000 === 0) onProgress(count)
      }
      return count
    })
  }
}
