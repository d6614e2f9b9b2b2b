import { applyPatch, previousJson, type UpdateRequest, type UpdateResult } from '../../domain/order-patch.js'
import { metadataText } from '../../domain/order-metadata.js'
import type { OrderV2Record } from '../../domain/orders.js'
import { GroupCommit, type BatchResults } from '../group-commit.js'
import { orderV2Json } from '../order-json.js'
import { toOrderV2Record, type OrderV2Row } from '../rows.js'
import type { Connection } from './connection.js'
import type { PostgresDatabase } from './database.js'
import { intArray, textArray } from './import.js'
import { orderV2Columns } from './order-pages.js'
import { bumpVersion, recordEvents, traceArrays, type Traced } from './write-sql.js'

/** More updates than this wait for the next batch. */
const MAX_BATCH = 1000

// The batch's orders, locked until COMMIT. Rows another transaction holds are skipped, not waited
// for, as by the other writes' batches: a batch never waits for one lock while holding others (an
// import locks its rows in the file's order, not by id); those orders are updated on their own
// afterwards, waiting for that one lock (LOCK_ONE).
const LOCK_BATCH = `SELECT ${orderV2Columns()} FROM orders WHERE id = ANY($1::bigint[]) FOR UPDATE SKIP LOCKED`
const LOCK_ONE = `SELECT ${orderV2Columns()} FROM orders WHERE id = $1::bigint FOR UPDATE`
const EXISTING = `SELECT id FROM orders WHERE id = ANY($1::bigint[])`

// The orders as the batch's patches left them, each change's `order.updated` event in arrival order
// (with its request's trace context), and one data_version bump, in one statement.
const WRITE = `WITH bumped AS (
    ${bumpVersion()}
  ), written AS (
    UPDATE orders o SET pet_id = t.pet_id, quantity = t.quantity, ship_date = t.ship_date, metadata = t.metadata, version = t.version
    FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::timestamptz[], $5::text[], $6::integer[]) AS t(id, pet_id, quantity, ship_date, metadata, version)
    WHERE o.id = t.id
  ), recorded AS (
    ${recordEvents(
      `SELECT e.order_id, 'order.updated' AS type, e.json, e.previous, e.traceparent, e.tracestate
        FROM unnest($7::bigint[], $8::text[], $9::text[], $10::text[], $11::text[]) WITH ORDINALITY AS e(order_id, json, previous, traceparent, tracestate, n)
        ORDER BY e.n`,
      'previous',
    )}
  )
  SELECT version FROM bumped`

/**
 * updateOrder's group commit on PostgreSQL: a batch is one transaction. It locks its orders, applies
 * each patch, in arrival order, to the order as the one before left it (domain/order-patch.ts: so
 * concurrent patches of one order all land, and an If-Match sees the version the one before made),
 * and writes the final rows, every change's event and the bump in one statement (WRITE).
 */
export class PostgresOrderUpdates {
  private readonly batches = new GroupCommit<Traced<UpdateRequest>, UpdateResult>({ maxBatch: MAX_BATCH, commit: (requests) => this.commit(requests) })

  constructor(private readonly database: PostgresDatabase) {}

  update(request: Traced<UpdateRequest>): Promise<UpdateResult> {
    return this.batches.submit(request)
  }

  /** Waits until every update already requested has settled, those written on their own too. */
  drain(): Promise<void> {
    return this.batches.drain()
  }

  /** One batch; resolves once committed. Not retried on a lost connection: the commit may have happened. */
  private async commit(requests: Traced<UpdateRequest>[]): Promise<BatchResults<UpdateResult>> {
    const { results, skipped } = await this.transaction(async (connection) => {
      const ids = [...new Set(requests.map((request) => request.id))]
      const { rows } = await connection.query<OrderV2Row>(LOCK_BATCH, [intArray(ids)])
      const orders = new Map(rows.map((row) => [row.id, toOrderV2Record(row)]))
      let locked = new Set<bigint>()
      if (orders.size < ids.length) {
        const { rows: existing } = await connection.query<{ id: bigint }>(EXISTING, [intArray(ids.filter((id) => !orders.has(id)))])
        locked = new Set(existing.map((row) => row.id))
      }
      return applyAll(connection, requests, orders, locked)
    })
    // An order another transaction held: its updates on their own, one after the other, in order.
    let previous: Promise<unknown> = Promise.resolve()
    for (const i of skipped) {
      const request = requests[i]!
      results[i] = previous = previous.then(
        () => this.one(request),
        () => this.one(request),
      )
    }
    return results
  }

  /** One update in its own transaction, waiting for its order's lock. */
  private async one(request: Traced<UpdateRequest>): Promise<UpdateResult> {
    const { results } = await this.transaction(async (connection) => {
      const { rows } = await connection.query<OrderV2Row>(LOCK_ONE, [request.id.toString()])
      return applyAll(connection, [request], new Map(rows.map((row) => [row.id, toOrderV2Record(row)])), new Set())
    })
    return results[0] as UpdateResult
  }

  /** A transaction whose data_version is observed once it has committed. */
  private async transaction(
    work: (connection: Connection) => Promise<Applied>,
  ): Promise<{ results: (UpdateResult | Promise<UpdateResult>)[]; skipped: number[] }> {
    const { results, skipped, version } = await this.database.transaction(work)
    if (version !== undefined) this.database.versions.observe(version)
    return { results, skipped }
  }
}

interface Applied {
  results: (UpdateResult | Promise<UpdateResult>)[]
  /** The requests whose order another transaction held locked (their results are to be filled in). */
  skipped: number[]
  /** data_version, if the batch bumped it. */
  version: bigint | undefined
}

/** The patches applied in order to the locked `orders`, and what changed written (WRITE). */
async function applyAll(
  connection: Connection,
  requests: Traced<UpdateRequest>[],
  orders: Map<bigint, OrderV2Record>,
  locked: ReadonlySet<bigint>,
): Promise<Applied> {
  const results: (UpdateResult | Promise<UpdateResult>)[] = new Array(requests.length)
  const skipped: number[] = []
  const events: { id: bigint; json: string; previous: string; request: Traced<UpdateRequest> }[] = []
  const changed = new Set<bigint>()
  requests.forEach((request, i) => {
    if (locked.has(request.id)) return void skipped.push(i)
    const result = applyPatch(orders.get(request.id), request.patch, request.expected)
    results[i] = result
    if (result.outcome !== 'updated') return
    orders.set(request.id, result.order)
    changed.add(request.id)
    events.push({ id: request.id, json: orderV2Json(result.order), previous: previousJson(result.previous), request })
  })
  if (events.length === 0) return { results, skipped, version: undefined }
  const rows = [...changed].map((id) => orders.get(id)!)
  const { rows: bumped } = await connection.query<{ version: bigint }>(WRITE, [
    intArray(rows.map((order) => order.id)),
    intArray(rows.map((order) => order.petId)),
    intArray(rows.map((order) => order.quantity)),
    textArray(rows.map((order) => order.shipDate)),
    textArray(rows.map((order) => metadataText(order.metadata))),
    intArray(rows.map((order) => order.version)),
    intArray(events.map((event) => event.id)),
    textArray(events.map((event) => event.json)),
    textArray(events.map((event) => event.previous)),
    ...traceArrays(events.map((event) => event.request)),
  ])
  return { results, skipped, version: bumped[0]!.version }
}
