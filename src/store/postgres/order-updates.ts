import { applyPatch, previousJson, type UpdateRequest, type UpdateResult } from '../../domain/order-patch.js'
import { metadataText } from '../../domain/order-metadata.js'
import type { OrderV2Record } from '../../domain/orders.js'
import { GroupCommit, type BatchResults } from '../group-commit.js'
import { orderV2Json } from '../order-json.js'
import { toOrderV2Record, type OrderV2Row } from '../rows.js'
import type { PostgresDatabase } from './database.js'
import { orderV2Columns } from './order-pages.js'
import { intArray, textArray } from './parameters.js'
import type { TraceContext } from '../../trace-context.js'
import { bumpVersion, recordEvents, traceContextArrays } from './write-sql.js'

/** More updates than this wait for the next batch. */
const MAX_BATCH = 1000

// A batch reads its orders without a lock, applies the patches in JS, and writes in one statement
// (its own transaction) only the rows still at the version it read: two round trips. The rows it
// writes it locks first, skipping any another transaction holds, as the other writes' batches do: a
// batch never waits for one lock while holding others (an import locks its rows in the file's
// order, not by id). An order that moved since the read, or was held, is updated on its own
// afterwards, waiting for its lock (LOCK_ONE).
const READ = `SELECT ${orderV2Columns()} FROM orders WHERE id = ANY($1::bigint[])`
const LOCK_ONE = `SELECT ${orderV2Columns()} FROM orders WHERE id = $1::bigint FOR UPDATE`

// The orders as the batch's patches left them, if still at the version read ($7), each written
// change's `order.updated` event in arrival order (with its request's trace context), and one
// data_version bump if anything was written, in one statement. It returns the ids written.
const WRITE = `WITH t AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::timestamptz[], $5::text[], $6::integer[], $7::integer[])
      AS t(id, pet_id, quantity, ship_date, metadata, version, read_version)
  ), target AS (
    SELECT t.* FROM orders o JOIN t ON o.id = t.id WHERE o.version = t.read_version ORDER BY o.id FOR UPDATE OF o SKIP LOCKED
  ), written AS (
    UPDATE orders o SET pet_id = t.pet_id, quantity = t.quantity, ship_date = t.ship_date, metadata = t.metadata, version = t.version
    FROM target t WHERE o.id = t.id AND o.version = t.read_version
    RETURNING o.id
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM written)')}
  ), recorded AS (
    ${recordEvents(
      `SELECT e.order_id, 'order.updated' AS type, e.json, e.previous, e.traceparent, e.tracestate
        FROM unnest($8::bigint[], $9::text[], $10::text[], $11::text[], $12::text[]) WITH ORDINALITY AS e(order_id, json, previous, traceparent, tracestate, n)
        JOIN written w ON w.id = e.order_id
        ORDER BY e.n`,
      'previous',
    )}
  )
  SELECT id, (SELECT version FROM bumped) AS data_version FROM written`

/**
 * updateOrder's group commit on PostgreSQL. A batch applies each patch, in arrival order, to the
 * order as the one before left it (domain/order-patch.ts: so concurrent patches of one order all
 * land, and an If-Match sees the version the one before made), and writes the final rows, every
 * change's event and the bump in one statement (WRITE), conditional on each row's version: an
 * answer is only given for a change that was written, or for an order as one snapshot saw it.
 */
export class PostgresOrderUpdates {
  private readonly batches = new GroupCommit<UpdateRequest, UpdateResult>({
    maxBatch: MAX_BATCH,
    traceContexts: true,
    commit: (requests, traces) => this.commit(requests, traces),
  })

  constructor(private readonly database: PostgresDatabase) {}

  /** Queues `request` for the next batch; settles once that batch has committed (or, its order held or moved meanwhile, once it is written on its own). */
  submit(request: UpdateRequest): Promise<UpdateResult> {
    return this.batches.submit(request)
  }

  /** Waits until every update already requested has settled, those written on their own too. */
  drain(): Promise<void> {
    return this.batches.drain()
  }

  /** One batch; resolves once committed. Not retried on a lost connection: the commit may have happened. */
  private async commit(requests: UpdateRequest[], traces: readonly (TraceContext | undefined)[]): Promise<BatchResults<UpdateResult>> {
    const ids = [...new Set(requests.map((request) => request.id))]
    const { rows } = await this.database.read<OrderV2Row>(READ, [intArray(ids)])
    const planned = plan(requests, traces, new Map(rows.map((row) => [row.id, toOrderV2Record(row)])))
    const results: (UpdateResult | Promise<UpdateResult>)[] = planned.results
    if (planned.events.length === 0) return results
    const { rows: written } = await this.database.execute<{ id: bigint; data_version: bigint }>(WRITE, writeParams(planned))
    if (written.length > 0) this.database.versions.observe(written[0]!.data_version)
    if (written.length === planned.rows.length) return results
    // An order that moved since the read, or that another transaction held: its updates on their
    // own, one after the other, in order.
    const done = new Set(written.map((row) => row.id))
    let previous: Promise<unknown> = Promise.resolve()
    requests.forEach((request, i) => {
      if (!planned.changed.has(request.id) || done.has(request.id)) return
      const alone = (): Promise<UpdateResult> => this.one(request, traces[i])
      results[i] = previous = previous.then(alone, alone)
    })
    return results
  }

  /** One update in its own transaction, waiting for its order's lock. */
  private async one(request: UpdateRequest, trace: TraceContext | undefined): Promise<UpdateResult> {
    const { result, version } = await this.database.transaction(async (connection) => {
      const { rows } = await connection.query<OrderV2Row>(LOCK_ONE, [request.id.toString()])
      const planned = plan([request], [trace], new Map(rows.map((row) => [row.id, toOrderV2Record(row)])))
      if (planned.events.length === 0) return { result: planned.results[0]!, version: undefined }
      const { rows: written } = await connection.query<{ data_version: bigint }>(WRITE, writeParams(planned))
      return { result: planned.results[0]!, version: written[0]!.data_version }
    })
    if (version !== undefined) this.database.versions.observe(version)
    return result
  }
}

/** A batch's patches applied in order to its orders as read: each one's result, and what is to be written. */
interface Planned {
  results: UpdateResult[]
  /** The orders changed, as the last of their patches left them, and the version each was read at. */
  rows: { order: OrderV2Record; readVersion: number }[]
  changed: Set<bigint>
  /** Each change's event, with the trace context of the request that made it. */
  events: { id: bigint; json: string; previous: string; trace: TraceContext | undefined }[]
}

function plan(requests: readonly UpdateRequest[], traces: readonly (TraceContext | undefined)[], orders: Map<bigint, OrderV2Record>): Planned {
  const readVersions = new Map<bigint, number>()
  const events: Planned['events'] = []
  const results = requests.map((request, i) => {
    const order = orders.get(request.id)
    const result = applyPatch(order, request.patch, request.expected)
    if (result.outcome !== 'updated') return result
    if (!readVersions.has(request.id)) readVersions.set(request.id, order!.version)
    orders.set(request.id, result.order)
    events.push({ id: request.id, json: orderV2Json(result.order), previous: previousJson(result.previous), trace: traces[i] })
    return result
  })
  const rows = [...readVersions].map(([id, readVersion]) => ({ order: orders.get(id)!, readVersion }))
  return { results, rows, changed: new Set(readVersions.keys()), events }
}

function writeParams({ rows, events }: Planned): unknown[] {
  return [
    intArray(rows.map(({ order }) => order.id)),
    intArray(rows.map(({ order }) => order.petId)),
    intArray(rows.map(({ order }) => order.quantity)),
    textArray(rows.map(({ order }) => order.shipDate)),
    textArray(rows.map(({ order }) => metadataText(order.metadata))),
    intArray(rows.map(({ order }) => order.version)),
    intArray(rows.map(({ readVersion }) => readVersion)),
    intArray(events.map((event) => event.id)),
    textArray(events.map((event) => event.json)),
    textArray(events.map((event) => event.previous)),
    ...traceContextArrays(events.map((event) => event.trace)),
  ]
}
