import type { Migration } from '../store.js'

/**
 * PostgreSQL schema, in order. Append only: a released migration is never edited.
 *
 * Same tables and rules as the SQLite schema (`../sqlite/migrations.ts`), in PostgreSQL types:
 * int64 ids are `bigint`, instants are `timestamptz`. `orders.id` and `pets.id` come from imports,
 * so they are not generated.
 */
export const POSTGRES_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'orders, pets, api keys',
    sql: `
      CREATE TABLE orders (
        id bigint PRIMARY KEY,
        pet_id bigint,
        quantity integer CHECK (quantity IS NULL OR quantity >= 1),
        ship_date timestamptz,
        complete boolean NOT NULL DEFAULT false,
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'shipped', 'cancelled')),
        cancelled_at timestamptz,
        cancelled_by_key bigint,
        CONSTRAINT orders_complete_only_when_shipped CHECK (NOT complete OR status = 'shipped')
      );
      CREATE TABLE pets (
        id bigint PRIMARY KEY,
        name text NOT NULL,
        tag text
      );
      CREATE TABLE api_keys (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name text NOT NULL,
        hash text NOT NULL UNIQUE,
        display_prefix text NOT NULL,
        scopes text[] NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz,
        revoked_at timestamptz
      );
      CREATE INDEX api_keys_display_prefix ON api_keys (display_prefix);
      CREATE TABLE data_version (
        id integer PRIMARY KEY CHECK (id = 1),
        version bigint NOT NULL
      );
      -- A random start below 2^48, as the SQLite schema does: a recreated database does not repeat
      -- the versions (hence the ETags) an old one gave out.
      INSERT INTO data_version (id, version) VALUES (1, floor(random() * 281474976710656)::bigint);
    `,
  },
]

/** Created before anything else, under the migration lock. */
export const SCHEMA_MIGRATIONS_TABLE = `
  CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`

/**
 * Key of the transaction-scoped advisory lock every migrating instance takes first ('petstore' in
 * ASCII, as an int64). Advisory locks are per database, so instances of other databases don't wait.
 */
export const MIGRATION_LOCK_KEY = '8099007544119226981'
