import type { Migration } from '../store.js'

/** Every change to orders runs this in its own transaction (see Store.dataVersion). */
export const BUMP_DATA_VERSION = 'UPDATE data_version SET version = version + 1 WHERE id = 1'

/** SQLite schema, in order. Append only: a released migration is never edited. */
export const SQLITE_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'orders, pets, api keys',
    sql: `
      CREATE TABLE orders (
        id INTEGER PRIMARY KEY,
        pet_id INTEGER,
        quantity INTEGER CHECK (quantity IS NULL OR quantity >= 1),
        ship_date TEXT,
        complete INTEGER NOT NULL DEFAULT 0 CHECK (complete IN (0, 1)),
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'shipped', 'cancelled')),
        cancelled_at TEXT,
        cancelled_by_key INTEGER,
        CHECK (complete = 0 OR status = 'shipped')
      );
      CREATE TABLE pets (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        tag TEXT
      );
      CREATE TABLE api_keys (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        display_prefix TEXT NOT NULL,
        scopes TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT,
        revoked_at TEXT
      );
      CREATE INDEX api_keys_display_prefix ON api_keys (display_prefix);
      CREATE TABLE data_version (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        version INTEGER NOT NULL
      );
      -- A random start (below 2^48), so a recreated database never repeats the ETags of the old one.
      INSERT INTO data_version (id, version) VALUES (1, abs(random() % 281474976710656));
    `,
  },
  {
    version: 2,
    name: 'v2 list: cancellation reason, indexes of its filters, the cursor secret',
    // The v2 list reads one branch per (status, complete) pair, each in id order from an index whose
    // equality prefix is that pair (and the pet): see ../order-page-sql.ts. A ship date range is a
    // range of the third index. The secret signs list cursors; every process of the file shares it.
    sql: `
      ALTER TABLE orders ADD COLUMN cancellation_reason TEXT CHECK (cancellation_reason IS NULL OR cancellation_reason IN
        ('customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other'));
      CREATE INDEX orders_status_complete_id ON orders (status, complete, id, ship_date);
      CREATE INDEX orders_pet_status_complete_id ON orders (pet_id, status, complete, id);
      CREATE INDEX orders_status_complete_ship_date ON orders (status, complete, ship_date, id);
      CREATE TABLE signing_secrets (
        purpose TEXT PRIMARY KEY,
        secret BLOB NOT NULL CHECK (length(secret) >= 32)
      );
      INSERT INTO signing_secrets (purpose, secret) VALUES ('list_cursor', randomblob(32));
    `,
  },  {
    version: 3,
    name: 'order events: the transactional outbox of the event feed',
    // A row per change, written in the change's transaction (../order-events.ts). AUTOINCREMENT: a
    // position is never given out twice, even after retention has deleted the newest events. SQLite
    // runs one write transaction at a time, so positions are handed out in commit order. `body` is
    // the event's JSON after its id, built when the event is written, so the feed is read by
    // concatenation. event_retention.pruned_through is the newest position retention has deleted:
    // a cursor before it has lost events (410).
    sql: `
      CREATE TABLE order_events (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        occurred_at TEXT NOT NULL,
        order_id INTEGER NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('order.created', 'order.updated', 'order.shipped', 'order.cancelled')),
        body TEXT NOT NULL
      );
      CREATE TABLE event_retention (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        pruned_through INTEGER NOT NULL
      );
      INSERT INTO event_retention (id, pruned_through) VALUES (1, 0);
    `,
  },
  {
    version: 4,
    name: 'writes through v2: shipped and completed times, order.completed events, idempotency keys',
    // SQLite cannot alter a CHECK, so order_events is rebuilt with every row at its position. Its
    // AUTOINCREMENT counter is carried over too (it may be past every row left, once retention has
    // deleted the newest events): dropping the old table deletes its sqlite_sequence row, and
    // renaming the new one renames that one's. An Idempotency-Key record is scoped to the API key
    // that sent it; the index serves the pruning of expired records, oldest first.
    sql: `
      ALTER TABLE orders ADD COLUMN shipped_at TEXT;
      ALTER TABLE orders ADD COLUMN completed_at TEXT;
      CREATE TABLE order_events_rebuilt (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        occurred_at TEXT NOT NULL,
        order_id INTEGER NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('order.created', 'order.updated', 'order.shipped', 'order.completed', 'order.cancelled')),
        body TEXT NOT NULL
      );
      INSERT INTO order_events_rebuilt (position, occurred_at, order_id, type, body)
        SELECT position, occurred_at, order_id, type, body FROM order_events ORDER BY position;
      DELETE FROM sqlite_sequence WHERE name = 'order_events_rebuilt';
      INSERT INTO sqlite_sequence (name, seq) SELECT 'order_events_rebuilt', seq FROM sqlite_sequence WHERE name = 'order_events';
      DROP TABLE order_events;
      ALTER TABLE order_events_rebuilt RENAME TO order_events;
      CREATE TABLE idempotency_keys (
        api_key_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        order_id INTEGER NOT NULL,
        response_status INTEGER NOT NULL,
        response_body TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        PRIMARY KEY (api_key_id, key)
      );
      CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
    `,
  },
  {
    version: 5,
    name: 'webhooks: endpoints with their feed positions and leases, their last attempts',
    // AUTOINCREMENT: an endpoint id is never given out twice. Instants are toISOString() text, so
    // they compare as text. event_types is comma-joined. The due index serves the dispatchers'
    // lease; attempts are read newest first per endpoint (their id is the order of recording), and
    // go with their endpoint.
    sql: `
      CREATE TABLE webhook_endpoints (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        url TEXT NOT NULL,
        event_types TEXT NOT NULL,
        description TEXT,
        enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
        disabled_reason TEXT CHECK (disabled_reason IN ('endpoint_gone', 'retries_exhausted', 'events_expired', 'disabled_by_request')),
        position INTEGER NOT NULL,
        failures INTEGER NOT NULL DEFAULT 0,
        failing_since TEXT,
        next_attempt_at TEXT,
        created_at TEXT NOT NULL,
        secret TEXT NOT NULL,
        previous_secret TEXT,
        previous_until TEXT,
        lease_owner TEXT,
        lease_until TEXT,
        CHECK ((enabled = 1) = (disabled_reason IS NULL))
      );
      CREATE INDEX webhook_endpoints_due ON webhook_endpoints (enabled, next_attempt_at, lease_until);
      CREATE TABLE webhook_attempts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        endpoint_id INTEGER NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        event_position INTEGER NOT NULL,
        attempted_at TEXT NOT NULL,
        status INTEGER,
        error TEXT,
        duration_ms INTEGER NOT NULL
      );
      CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id);
    `,
  },
  {
    version: 6,
    name: "webhooks: an endpoint's revision, moved by every change to its deliveries",
    // A dispatcher's writes under a lease return it, so a delivery loop learns of a PATCH, rotation,
    // replay or disabling at its next write and leases the endpoint anew.
    sql: `ALTER TABLE webhook_endpoints ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;`,
  },
  {
    version: 7,
    name: 'order events: the W3C trace context of the write that recorded each',
    // `traceparent` and `tracestate` as the headers carry them (NULL: the write was not traced), so
    // that an event's deliveries can join its write's trace; the feed never shows them. A column
    // without a default or a constraint changes only the table's schema text: rows written before
    // read it as NULL, and none is rewritten, however many events the table holds.
    sql: `
      ALTER TABLE order_events ADD COLUMN traceparent TEXT;
      ALTER TABLE order_events ADD COLUMN tracestate TEXT;
    `,
  },
  {
    version: 8,
    name: 'webhooks: the one ping in flight per endpoint, claimed until its delivery must have ended',
    // A table of its own, not columns of the endpoint: a ping changes nothing of the endpoint, and
    // the dispatchers' lease pass never meets a claim. The claim goes with its endpoint.
    sql: `
      CREATE TABLE webhook_ping_claims (
        endpoint_id INTEGER PRIMARY KEY REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        token TEXT NOT NULL,
        claimed_until TEXT NOT NULL
      );
    `,
  },
  {
    version: 9,
    name: "orders: a version moved by every change, metadata, and metadata's index kept by the database",
    // `version` starts at 1 for every order, those already here included; `metadata` is its JSON
    // text as the code writes it (NULL: none). order_metadata is an index of that text, derived from
    // it by triggers in the statement that writes it, so it can never disagree with it: the list's
    // metadata filter reads (key, value, order_id) in id order. Adding columns with a constant
    // default rewrites no row.
    sql: `
      ALTER TABLE orders ADD COLUMN version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1);
      ALTER TABLE orders ADD COLUMN metadata TEXT;
      CREATE TABLE order_metadata (
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        order_id INTEGER NOT NULL,
        PRIMARY KEY (key, value, order_id)
      ) WITHOUT ROWID;
      CREATE INDEX order_metadata_order ON order_metadata (order_id);
      CREATE TRIGGER orders_metadata_inserted AFTER INSERT ON orders WHEN NEW.metadata IS NOT NULL BEGIN
        INSERT INTO order_metadata (key, value, order_id) SELECT key, value, NEW.id FROM json_each(NEW.metadata);
      END;
      CREATE TRIGGER orders_metadata_updated AFTER UPDATE OF metadata ON orders WHEN OLD.metadata IS NOT NEW.metadata BEGIN
        DELETE FROM order_metadata WHERE order_id = OLD.id;
        INSERT INTO order_metadata (key, value, order_id) SELECT key, value, NEW.id FROM json_each(NEW.metadata);
      END;
    `,
  },
  {
    version: 10,
    name: "orders: metadata's index without its second index, by order",
    // A changed order's old rows are found by the primary key, from its old metadata, instead of
    // through an index by order_id that every place with metadata also wrote (three more B-tree
    // inserts and their pages in every commit's WAL, for a lookup only a change of metadata needs).
    sql: `
      DROP TRIGGER orders_metadata_updated;
      DROP INDEX order_metadata_order;
      CREATE TRIGGER orders_metadata_updated AFTER UPDATE OF metadata ON orders WHEN OLD.metadata IS NOT NEW.metadata BEGIN
        DELETE FROM order_metadata WHERE (key, value, order_id) IN (SELECT key, value, OLD.id FROM json_each(OLD.metadata));
        INSERT INTO order_metadata (key, value, order_id) SELECT key, value, NEW.id FROM json_each(NEW.metadata);
      END;
    `,
  },
]
