import { metadataText } from '../../domain/order-metadata.js'
import { importConflict, importedCancellation, IMPORT_MOVES, KEEPS_CANCELLATION } from '../../domain/order-import.js'
import type { OrderRecord, OrderStatus } from '../../domain/orders.js'
import { ImportConflictError, type ImportProgress } from '../store.js'
import type { PostgresDatabase } from './database.js'
import { consumeInBatches } from './import.js'
import { ORDER_V2_JSON, utc } from './order-pages.js'
import { boolArray, intArray, textArray } from './parameters.js'
import { bumpVersion, recordEvents, WRITE_TIME } from './write-sql.js'

// The records of a batch, each with the cancellation domain/order-import.ts gives it. The WHERE
// refuses a move of status the import's rules refuse ($10, IMPORT_MOVES: judged here, under the
// row's lock, so a refused row is never written) and the refused rows are then looked up to name the
// first one. An order whose status keeps its cancellation keeps it ($11, KEEPS_CANCELLATION: the
// stored one is only read here, under the same lock). It also leaves an order the record would not
// change untouched: no event (an unchanged re-import records nothing); one it changes has its version
// moved on. Each row written is noted, with its order's v2 JSON, in the import's IMPORT_EVENTS table
// (`xmax = 0`: the row is new); its events are recorded when the import ends (RECORD_IMPORT_EVENTS).
const UPSERT_ORDERS = `WITH written AS (INSERT INTO orders AS o (id, pet_id, quantity, ship_date, complete, status, cancelled_at, cancellation_reason, metadata)
  SELECT t.id, t.pet_id, t.quantity, t.ship_date, t.complete, t.status, t.cancelled_at, t.reason, t.metadata
  FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::timestamptz[], $5::boolean[], $6::text[], $7::timestamptz[], $8::text[], $9::text[])
    AS t(id, pet_id, quantity, ship_date, complete, status, cancelled_at, reason, metadata)
  ON CONFLICT (id) DO UPDATE SET
    pet_id = excluded.pet_id, quantity = excluded.quantity, ship_date = excluded.ship_date,
    complete = excluded.complete, status = excluded.status, metadata = excluded.metadata, version = o.version + 1,
    cancelled_at = CASE WHEN o.status = ANY ($11::text[]) THEN o.cancelled_at ELSE excluded.cancelled_at END,
    cancellation_reason = CASE WHEN o.status = ANY ($11::text[]) THEN o.cancellation_reason ELSE excluded.cancellation_reason END
  WHERE o.status || ' ' || excluded.status = ANY ($10::text[])
    AND (o.pet_id, o.quantity, o.ship_date, o.complete, o.status, o.metadata)
      IS DISTINCT FROM (excluded.pet_id, excluded.quantity, excluded.ship_date, excluded.complete, excluded.status, excluded.metadata)
  RETURNING o.id, o.xmax = 0 AS created, ${ORDER_V2_JSON} AS json)
  INSERT INTO import_events (order_id, type, json)
    SELECT id, CASE WHEN created THEN 'order.created' ELSE 'order.updated' END, json FROM written`
/** UPSERT_ORDERS' $10 and $11: the import's rules, the same for every batch. */
const MOVES = textArray(IMPORT_MOVES.map(([from, to]) => `${from} ${to}`))
const KEEPING = textArray([...KEEPS_CANCELLATION])
/** The import's one time, for its cancelled records without their own: the transaction's, as every write's (WRITE_TIME). */
const IMPORT_TIME = `SELECT ${utc(WRITE_TIME)} AS now`
/** The rows an import wrote, in order: dropped with its transaction. */
const IMPORT_EVENTS = `CREATE TEMPORARY TABLE import_events (n bigserial, order_id bigint, type text, json text) ON COMMIT DROP`
// The end of an import that wrote rows: its bump, then its events (recordEvents), in input order,
// with no trace context: an import is no request's write.
const RECORD_IMPORT_EVENTS = `WITH bumped AS (
    ${bumpVersion()}
  ), recorded AS (
    ${recordEvents('SELECT order_id, type, json, NULL AS traceparent, NULL AS tracestate FROM import_events ORDER BY n')}
  )
  SELECT version FROM bumped`
// After the upsert, an accepted row has the status it was given; a refused one still has another.
const FIRST_REFUSED = `SELECT t.id, o.status AS current, t.status AS wanted
  FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS t(id, status, n)
  JOIN orders o ON o.id = t.id
  WHERE o.status <> t.status
  ORDER BY t.n LIMIT 1`

/** The orders import of the PostgreSQL store (OrdersRepository.import): one transaction, batches of multi-row upserts. */
export async function importOrders(database: PostgresDatabase, records: AsyncIterable<OrderRecord>, onProgress?: ImportProgress): Promise<number> {
  const { count, version } = await database.transaction(async (connection) => {
    await connection.query(IMPORT_EVENTS)
    const now = (await connection.query<{ now: string }>(IMPORT_TIME)).rows[0]!.now
    let written = 0
    const count = await consumeInBatches(records, onProgress, async (batch: OrderRecord[]) => {
      const ids = intArray(batch.map((r) => r.id))
      const statuses = textArray(batch.map((r) => r.status))
      const cancellations = batch.map((r) => importedCancellation(r, now))
      const params = [
        ids,
        intArray(batch.map((r) => r.petId)),
        intArray(batch.map((r) => r.quantity)),
        textArray(batch.map((r) => r.shipDate)),
        boolArray(batch.map((r) => r.complete)),
        statuses,
        textArray(cancellations.map((c) => c.cancelledAt)),
        textArray(cancellations.map((c) => c.cancellationReason)),
        // NULL for the whole array when no record has metadata: unnest() pads it with NULLs.
        batch.some((r) => r.metadata !== undefined && r.metadata !== null) ? textArray(batch.map((r) => metadataText(r.metadata ?? null))) : null,
        MOVES,
        KEEPING,
      ]
      const result = await connection.query(UPSERT_ORDERS, params)
      written += result.rowCount ?? 0
      if (result.rowCount === batch.length) return
      // Rows the upsert did not write: unchanged, or refused.
      const { rows } = await connection.query<{ id: bigint; current: OrderStatus; wanted: OrderStatus }>(FIRST_REFUSED, [ids, statuses])
      const refused = rows[0]
      if (refused !== undefined) throw new ImportConflictError(importConflict(BigInt(refused.id), refused.current, refused.wanted), BigInt(refused.id))
    })
    if (written === 0) return { count, version: undefined }
    const version = (await connection.query<{ version: bigint }>(RECORD_IMPORT_EVENTS)).rows[0]!.version
    return { count, version }
  })
  // Only once committed: a version that never committed must not label a list.
  if (version !== undefined) database.versions.observe(version)
  // Statistics and the visibility map right after a bulk load, as PostgreSQL advises: before
  // autovacuum's first pass, the planner took a freshly imported table's statuses for rare and read
  // v2 pages through the wrong indexes, and the v2 probe's index-only scans fetched every row from
  // the table (a one-month page: ~17 ms, then 2 ms; docs/benchmarks.md). VACUUM skips the pages
  // already all-visible: after a small import it reads little. The import has committed whatever
  // happens here; a failed VACUUM leaves both to autovacuum. order_metadata too, whose triggers the
  // import filled: without its statistics, a filter of two pairs walked the common one whole
  // (16.6 ms for a page at 1,000,000 orders, against 0.9 ms: docs/benchmarks.md).
  if (version !== undefined) await database.execute('VACUUM (ANALYZE) orders, order_metadata').catch(() => {})
  return count
}
