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
  {
    version: 2,
    name: 'orders.list_json: each order as the list writes it',
    // Building the JSON of a million orders took PostgreSQL about 1.4 s of one core per list (to_char
    // alone 0.6 s), which made it the list's bottleneck; stored, it is built once, when the order is
    // written (PostgreSQL recomputes it on every write to the row, whoever writes).
    // Byte for byte what the Order schema's serializer writes for the same row: fields in schema
    // order, absent ones omitted, ids and quantities as integer literals, shipDate as
    // Date#toISOString() writes it, complete always present.
    // The function must be IMMUTABLE for a generated column. to_char() is only STABLE because some of
    // its patterns follow the locale or the session time zone; this pattern uses none of them, on a
    // timestamp already converted to UTC, so the result depends on the arguments alone.
    // Adding the column rewrites the table (about 4 s per million orders, under an exclusive lock).
    sql: `
      CREATE FUNCTION order_list_json(id bigint, pet_id bigint, quantity integer, ship_date timestamptz, complete boolean)
        RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $$ SELECT '{"id":' || id
          || coalesce(',"petId":' || pet_id, '')
          || coalesce(',"quantity":' || quantity, '')
          || coalesce(',"shipDate":"' || to_char(ship_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"', '')
          || CASE WHEN complete THEN ',"complete":true}' ELSE ',"complete":false}' END $$;
      ALTER TABLE orders ADD COLUMN list_json text NOT NULL
        GENERATED ALWAYS AS (order_list_json(id, pet_id, quantity, ship_date, complete)) STORED;
    `,
  },
  {
    version: 3,
    name: 'v2 list: cancellation reason, the cursor secret',
    // A nullable column without a default changes only the catalog. The CHECK is NOT VALID so that
    // adding it does not scan the table under this migration's exclusive lock; migration 4 validates it.
    // 32 random bytes from two v4 UUIDs (pg_strong_random, 244 random bits): gen_random_bytes needs pgcrypto.
    sql: `
      ALTER TABLE orders ADD COLUMN cancellation_reason text;
      ALTER TABLE orders ADD CONSTRAINT orders_cancellation_reason CHECK (cancellation_reason IN
        ('customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other')) NOT VALID;
      CREATE TABLE signing_secrets (
        purpose text PRIMARY KEY,
        secret bytea NOT NULL CHECK (length(secret) >= 16)
      );
      INSERT INTO signing_secrets (purpose, secret)
        VALUES ('list_cursor', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
    `,
  },
  // The rest run outside the migration transaction (see migration-runner.ts): on a large table
  // they must not block writes while they scan it.
  {
    version: 4,
    name: 'validate orders_cancellation_reason',
    transaction: false,
    sql: 'ALTER TABLE orders VALIDATE CONSTRAINT orders_cancellation_reason',
  },
  // The v2 list reads one branch per (status, complete) pair, each in id order from an index whose
  // equality prefix is that pair (and the pet): see ../order-page-sql.ts. A ship date range is a
  // range of the third index.
  {
    version: 5,
    name: 'index orders (status, complete, id, ship_date)',
    transaction: false,
    sql: 'CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_status_complete_id ON orders (status, complete, id, ship_date)',
  },
  {
    version: 6,
    name: 'index orders (pet_id, status, complete, id)',
    transaction: false,
    sql: 'CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_pet_status_complete_id ON orders (pet_id, status, complete, id)',
  },
  {
    version: 7,
    name: 'index orders (status, complete, ship_date, id)',
    transaction: false,
    sql: 'CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_status_complete_ship_date ON orders (status, complete, ship_date, id)',
  },  {
    version: 8,
    name: 'order events: the transactional outbox of the event feed',
    // A row per change, written in the change's transaction (../order-events.ts). Positions come
    // from the sequence, but only once the writing transaction holds data_version's row lock, which
    // it keeps until COMMIT: so they are handed out in commit order, and a reader resuming after the
    // last position it saw cannot pass one that commits later (docs/decisions.md). `body` is the
    // event's JSON after its id, built when the event is written, so the feed is read by
    // concatenation. event_retention.pruned_through: the newest position retention has deleted.
    sql: `
      CREATE SEQUENCE order_event_position AS bigint;
      CREATE TABLE order_events (
        position bigint PRIMARY KEY,
        occurred_at timestamptz NOT NULL,
        order_id bigint NOT NULL,
        type text NOT NULL CHECK (type IN ('order.created', 'order.updated', 'order.shipped', 'order.cancelled')),
        body text NOT NULL
      );
      CREATE TABLE event_retention (
        id integer PRIMARY KEY CHECK (id = 1),
        pruned_through bigint NOT NULL
      );
      INSERT INTO event_retention (id, pruned_through) VALUES (1, 0);
    `,
  },
  {
    version: 9,
    name: 'writes through v2: shipped and completed times, order.completed events, idempotency keys',
    // Nullable columns without a default change only the catalog. The events' type CHECK is
    // replaced by one NOT VALID, so that no scan of the events happens under this migration's
    // exclusive lock; migration 10 validates it. An Idempotency-Key record is scoped to the API key
    // that sent it; the expires_at index serves the pruning of expired records, oldest first.
    sql: `
      ALTER TABLE orders ADD COLUMN shipped_at timestamptz, ADD COLUMN completed_at timestamptz;
      ALTER TABLE order_events DROP CONSTRAINT order_events_type_check;
      ALTER TABLE order_events ADD CONSTRAINT order_events_type CHECK (type IN
        ('order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled')) NOT VALID;
      CREATE TABLE idempotency_keys (
        api_key_id bigint NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        order_id bigint NOT NULL,
        response_status integer NOT NULL,
        response_body text NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (api_key_id, key)
      );
      CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
    `,
  },
  {
    version: 10,
    name: 'validate order_events_type',
    transaction: false,
    sql: 'ALTER TABLE order_events VALIDATE CONSTRAINT order_events_type',
  },
  {
    version: 11,
    name: 'webhooks: endpoints with their feed positions and leases, their last attempts',
    // An identity's sequence never gives an id out twice. The due index serves the dispatchers'
    // lease; attempts are read newest first per endpoint (their id is the order of recording), and
    // go with their endpoint.
    sql: `
      CREATE TABLE webhook_endpoints (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url text NOT NULL,
        event_types text[] NOT NULL CHECK (event_types <@ ARRAY['order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled']),
        description text,
        enabled boolean NOT NULL DEFAULT true,
        disabled_reason text CHECK (disabled_reason IN ('endpoint_gone', 'retries_exhausted', 'events_expired', 'disabled_by_request')),
        position bigint NOT NULL,
        failures integer NOT NULL DEFAULT 0,
        failing_since timestamptz,
        next_attempt_at timestamptz,
        created_at timestamptz NOT NULL,
        secret text NOT NULL,
        previous_secret text,
        previous_until timestamptz,
        lease_owner text,
        lease_until timestamptz,
        CHECK (enabled = (disabled_reason IS NULL))
      );
      CREATE INDEX webhook_endpoints_due ON webhook_endpoints (enabled, next_attempt_at, lease_until);
      CREATE TABLE webhook_attempts (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        endpoint_id bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        event_position bigint NOT NULL,
        attempted_at timestamptz NOT NULL,
        status integer,
        error text,
        duration_ms integer NOT NULL
      );
      CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id);
    `,
  },
  {
    version: 12,
    name: "webhooks: an endpoint's revision, moved by every change to its deliveries",
    // A dispatcher's writes under a lease return it, so a delivery loop learns of a PATCH, rotation,
    // replay or disabling at its next write and leases the endpoint anew.
    sql: 'ALTER TABLE webhook_endpoints ADD COLUMN revision integer NOT NULL DEFAULT 0',
  },
  {
    version: 13,
    name: 'order events: the W3C trace context of the write that recorded each',
    // `traceparent` and `tracestate` as the headers carry them (NULL: the write was not traced), so
    // that an event's deliveries can join its write's trace; the feed never shows them. Nullable
    // columns without a default change only the catalog: no row is rewritten or scanned, so the
    // exclusive lock is held for a moment whatever the size of the table.
    sql: 'ALTER TABLE order_events ADD COLUMN traceparent text, ADD COLUMN tracestate text',
  },
  {
    version: 14,
    name: 'webhooks: the one ping in flight per endpoint, claimed until its delivery must have ended',
    // A table of its own, not columns of the endpoint: a ping changes nothing of the endpoint, and
    // the dispatchers' lease pass (FOR UPDATE SKIP LOCKED) never skips a row a ping holds locked.
    // The claim goes with its endpoint.
    sql: `
      CREATE TABLE webhook_ping_claims (
        endpoint_id bigint PRIMARY KEY REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        token text NOT NULL,
        claimed_until timestamptz NOT NULL
      )
    `,
  },
  {
    version: 15,
    name: "orders: a version moved by every change, metadata, and metadata's index kept by the database",
    // `version` starts at 1 for every order, those already here included; `metadata` is its JSON
    // text as the code writes it (text, not jsonb: jsonb would reorder its keys and respace it, and
    // the order's JSON is built from the text as it is; NULL: none). order_metadata is an index of
    // that text, derived from it by a trigger in the statement that writes it, so it can never
    // disagree with it: the list's metadata filter reads (key, value, order_id) in id order. Since
    // PostgreSQL 11 a column with a constant default rewrites no row.
    sql: `
      ALTER TABLE orders ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version >= 1), ADD COLUMN metadata text;
      CREATE TABLE order_metadata (
        key text NOT NULL,
        value text NOT NULL,
        order_id bigint NOT NULL,
        PRIMARY KEY (key, value, order_id)
      );
      CREATE INDEX order_metadata_order ON order_metadata (order_id);
      CREATE FUNCTION order_metadata_index() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'UPDATE' THEN
          DELETE FROM order_metadata WHERE order_id = OLD.id;
        END IF;
        INSERT INTO order_metadata (key, value, order_id) SELECT key, value, NEW.id FROM json_each_text(NEW.metadata::json);
        RETURN NULL;
      END $$;
      CREATE TRIGGER orders_metadata_inserted AFTER INSERT ON orders
        FOR EACH ROW WHEN (NEW.metadata IS NOT NULL) EXECUTE FUNCTION order_metadata_index();
      CREATE TRIGGER orders_metadata_updated AFTER UPDATE OF metadata ON orders
        FOR EACH ROW WHEN (OLD.metadata IS DISTINCT FROM NEW.metadata) EXECUTE FUNCTION order_metadata_index();
    `,
  },
  {
    version: 16,
    name: "orders: metadata's index kept once per statement, without its second index, by order",
    // A trigger per row ran its INSERT once for every order of a batch (a place batch of 50: 50
    // executions); per statement, over the statement's transition tables, it runs once. Transition
    // tables cannot go with a column list (UPDATE OF metadata), so the update trigger fires for every
    // UPDATE of orders and keeps to the rows whose metadata changed. A changed order's old rows are
    // found by the primary key, from its old metadata, instead of through an index by order_id that
    // every place with metadata also wrote.
    sql: `
      DROP TRIGGER orders_metadata_inserted ON orders;
      DROP TRIGGER orders_metadata_updated ON orders;
      DROP FUNCTION order_metadata_index();
      DROP INDEX order_metadata_order;
      CREATE FUNCTION order_metadata_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO order_metadata (key, value, order_id)
          SELECT m.key, m.value, n.id FROM new_orders n CROSS JOIN LATERAL json_each_text(n.metadata::json) m
          WHERE n.metadata IS NOT NULL;
        RETURN NULL;
      END $$;
      CREATE FUNCTION order_metadata_updated() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        DELETE FROM order_metadata d
          USING old_orders o JOIN new_orders n ON n.id = o.id CROSS JOIN LATERAL json_each_text(o.metadata::json) m
          WHERE o.metadata IS DISTINCT FROM n.metadata AND d.key = m.key AND d.value = m.value AND d.order_id = o.id;
        INSERT INTO order_metadata (key, value, order_id)
          SELECT m.key, m.value, n.id FROM old_orders o JOIN new_orders n ON n.id = o.id CROSS JOIN LATERAL json_each_text(n.metadata::json) m
          WHERE o.metadata IS DISTINCT FROM n.metadata;
        RETURN NULL;
      END $$;
      CREATE TRIGGER orders_metadata_inserted AFTER INSERT ON orders
        REFERENCING NEW TABLE AS new_orders FOR EACH STATEMENT EXECUTE FUNCTION order_metadata_inserted();
      CREATE TRIGGER orders_metadata_updated AFTER UPDATE ON orders
        REFERENCING OLD TABLE AS old_orders NEW TABLE AS new_orders FOR EACH STATEMENT EXECUTE FUNCTION order_metadata_updated();
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
 * Key of the session-level advisory lock every migrating instance takes first ('petstore' in
 * ASCII, as an int64; migration-runner.ts). Advisory locks are per database, so instances of other
 * databases don't wait.
 */
export const MIGRATION_LOCK_KEY = '8099007544119226981'
