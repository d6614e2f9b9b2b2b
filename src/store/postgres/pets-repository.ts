import type { Pet } from '../../schemas/pet.js'
import { toPet, type PetRow } from '../rows.js'
import type { ImportProgress, PetsRepository } from '../store.js'
import type { PostgresDatabase } from './database.js'
import { consumeInBatches } from './import.js'
import { int8, intArray, textArray } from './parameters.js'

const UPSERT_PETS = `INSERT INTO pets (id, name, tag)
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])
  ON CONFLICT (id) DO UPDATE SET name = excluded.name, tag = excluded.tag`

export class PostgresPetsRepository implements PetsRepository {
  constructor(private readonly database: PostgresDatabase) {}

  async find(id: bigint): Promise<Pet | undefined> {
    const { rows } = await this.database.read<PetRow>('SELECT id, name, tag FROM pets WHERE id = $1', [int8(id)])
    return rows[0] === undefined ? undefined : toPet(rows[0])
  }

  async import(records: AsyncIterable<Pet>, onProgress?: ImportProgress): Promise<number> {
    return this.database.transaction((connection) =>
      consumeInBatches(records, onProgress, async (batch: Pet[]) => {
        await connection.query(UPSERT_PETS, [intArray(batch.map((p) => p.id)), textArray(batch.map((p) => p.name)), textArray(batch.map((p) => p.tag))])
      }),
    )
  }
}
