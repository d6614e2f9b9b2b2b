import { CANCEL, COMPLETE, SHIP, type OrderWriteRule } from '../../domain/order-writes.js'
import type { CancellationReason, CancelResult, CompleteResult, ExpectedVersion, ShipResult } from '../../domain/orders.js'
import type { TraceContext } from '../../trace-context.js'
import { GroupCommit, type BatchResults } from '../group-commit.js'
import { orderStateAssignments, orderStateCondition } from '../order-state-sql.js'
import { toOrderV2Record, type OrderV2Row } from '../rows.js'
import { StoreUnavailableError } from '../store.js'
import type { PostgresDatabase } from './database.js'
import { ORDER_V2_JSON, orderV2Columns, readOrderV2 } from './order-pages.js'
import { intArray, textArray } from './parameters.js'
import { bumpVersion, changedOrders, recordEvents, traceContextArrays, WRITE_TIME } from './write-sql.js'

/** More writes than this wait for the next batch. */
const MAX_BATCH = 5000

/** A write to one order, and the version it requires (If-Match; undefined: any). */
export interface RowWrite {
  id: bigint
  expected: ExpectedVersion
}

/** A cancel: by an API key (or none), for a reason (or none). */
export type CancelWrite = RowWrite & { cancelledByKey: bigint | null; reason: CancellationReason | null }

/** What a single write returns: the order it changed, and data_version if it bumped it. */
type ChangedRow = OrderV2Row & { data_version: bigint | null }
/** What a batch returns: the orders it changed, and the others as they were. */
type BatchRow = ChangedRow & { changed: boolean }

/**
 * One kind of write to single orders (a cancel, a ship, a complete): what it answers (the rule both
 * stores share), its two statements (rowWriteStatements), and its requests as the statements'
 * parameters, with their trace contexts.
 */
interface RowWriteKind<Request extends RowWrite, Result> {
  rule: OrderWriteRule<Result>
  statements: { batch: string; single: string }
  params: (requests: readonly Request[], traces: readonly (TraceContext | undefined)[]) => unknown[]
}

/**
 * One kind of write to single orders on PostgreSQL, from the repository's call to its answer. Group
 * commit (../group-commit.ts, which also keeps each write's trace context): a batch is one
 * transaction, one statement (`batch`), so one WAL flush and one data_version bump acknowledge all of
 * its writes, instead of each waiting for the previous one's flush behind the data_version row lock.
 *
 * Every write still gets its own exact outcome. Of several writes of one order in a batch the first
 * decides (as if they ran in arrival order): at most one changes it, the others get the rule's
 * `repeated` of its result (where one of the two requires a version, If-Match, the later one is
 * written on its own after the first instead). An order whose row another transaction held locked is
 * written on its own right after the batch (`single`), waiting for that lock as a single write
 * always has.
 *
 * Each result carries the order as it stands, for v2's answer: the batch's one statement returns
 * them (RETURNING of its UPDATE, and its snapshot's rows of the others), so a batch is still one
 * round trip whatever its size. Neither statement is retried on a lost connection: its commit may
 * have happened. data_version is observed only once a statement has committed.
 */
export class RowWrites<Request extends RowWrite, Result> {
  private readonly batches: GroupCommit<Request, Result>
  private closed = false

  constructor(
    private readonly database: PostgresDatabase,
    private readonly kind: RowWriteKind<Request, Result>,
  ) {
    this.batches = new GroupCommit({ maxBatch: MAX_BATCH, traceContexts: true, commit: (requests, traces) => this.commit(requests, traces) })
  }

  /** Queues `request` for the next batch; settles with its own result once that batch has committed. Refused once close() has begun. */
  submit(request: Request): Promise<Result> {
    return this.closed ? Promise.reject(new StoreUnavailableError('the store is closed')) : this.batches.submit(request)
  }

  /** Refuses new writes, and waits until every write already requested has settled, those written on their own too. */
  close(): Promise<void> {
    this.closed = true
    return this.batches.drain()
  }

  private async commit(requests: Request[], traces: readonly (TraceContext | undefined)[]): Promise<BatchResults<Result>> {
    const { rule, statements, params } = this.kind
    const first = new Map<bigint, number>() // an order's id → the index of its first write in the batch
    for (let i = 0; i < requests.length; i++) if (!first.has(requests[i]!.id)) first.set(requests[i]!.id, i)
    const isFirst = (request: Request, i: number): boolean => first.get(request.id) === i
    const distinct =
      first.size === requests.length
        ? params(requests, traces)
        : params(
            requests.filter(isFirst),
            traces.filter((_, i) => isFirst(requests[i]!, i)),
          )
    const { rows } = await this.database.execute<BatchRow>(statements.batch, distinct)
    const found = new Map<bigint, BatchRow>()
    for (const row of rows) {
      found.set(row.id, row)
      if (row.changed && row.data_version !== null) this.database.versions.observe(row.data_version)
    }
    const results: (Result | Promise<Result>)[] = new Array(requests.length)
    for (let i = 0; i < requests.length; i++) {
      const request = requests[i]!
      const j = first.get(request.id)!
      if (j < i) {
        const decided = results[j]!
        // Where either requires a version (If-Match), the first's answer is not this one's: this one is
        // written on its own once the first has settled, and judged by the order as the first left it.
        if (request.expected !== undefined || requests[j]!.expected !== undefined) {
          const alone = (): Promise<Result> => this.writeOne(request, traces[i])
          results[i] = Promise.resolve(decided).then(alone, alone)
        } else results[i] = decided instanceof Promise ? decided.then(rule.repeated) : rule.repeated(decided)
        continue
      }
      const row = found.get(request.id)
      if (row === undefined) results[i] = rule.missed(undefined)! // an unknown order: not found
      else if (row.changed) results[i] = rule.changed(toOrderV2Record(row))
      // Undefined when the order could take the write but was locked (or changed since the snapshot):
      // written on its own, not awaited: the next batch need not wait for another transaction's lock.
      else results[i] = rule.missed(toOrderV2Record(row), request.expected) ?? this.writeOne(request, traces[i])
    }
    return results
  }

  /** One write in its own transaction (`single`), waiting for the order's row lock if another holds it. */
  private async writeOne(request: Request, trace: TraceContext | undefined): Promise<Result> {
    const { rule, statements, params } = this.kind
    const values = params([request], [trace])
    for (;;) {
      const { rows } = await this.database.execute<ChangedRow>(statements.single, values)
      const changed = rows[0]
      if (changed !== undefined) {
        if (changed.data_version !== null) this.database.versions.observe(changed.data_version)
        return rule.changed(toOrderV2Record(changed))
      }
      const answer = rule.missed(await readOrderV2((sql, values) => this.database.read(sql, values), request.id), request.expected)
      if (answer !== undefined) return answer
      // It can take the write after all: placed or imported after the update's snapshot. Its turn now.
    }
  }
}

// An order as v2 shows it (order-pages.ts), qualified by `o` so that an UPDATE … FROM can RETURN it;
// a changed one also with its v2 JSON and its request's (`t`) trace context, for its event.
const ORDER_COLUMNS = orderV2Columns('o')
const CHANGED_ORDER_COLUMNS = `${ORDER_COLUMNS}, ${ORDER_V2_JSON} AS json, t.traceparent, t.tracestate`

/**
 * One kind of write to single orders as SQL, beside what its rule says (the state it changes an order
 * from and to, and its event): the requests' parameter arrays (`request`, unnested into `columns`,
 * the first `order_id`: not `id`, which the order's columns name; then `if_match`, the version the
 * write requires (NULL: any); the last two `traceparent, tracestate`, traceContextArrays), and what
 * else the write sets (`set`, which reads the request as `t`: when, and a cancel's who and why; the
 * version moves on too).
 */
interface RowWriteSql {
  request: string
  columns: string
  set: string
}

/**
 * `batch`: the writes of distinct orders in one statement (one transaction). Rows another transaction
 * holds locked are skipped, not waited for: a batch never waits for an order's lock while holding
 * others' (no deadlock with a concurrent import or another instance's batch, and one slow lock does
 * not hold up the whole batch); those orders are written one by one afterwards (`single`). The version
 * is bumped once, if anything changed. Every sub-statement sees the statement's snapshot. It returns a
 * row per order it changed (`changed`, the row as the UPDATE left it, with the version if bumped) and
 * a row per other requested order as the snapshot had it: the orders v2 answers with, in the same
 * round trip. Of those, one that could still take the write was locked (or changed since).
 *
 * `single`: one write on its own, waiting for the order's lock. The conditional update, its version
 * bump and its event are one statement, hence one transaction: the bump happens exactly when the
 * order changed. It returns the order it changed; a miss is read by a separate statement, whose fresh
 * snapshot sees whatever change made the update miss.
 */
function rowWriteStatements(rule: OrderWriteRule<unknown>, { request, columns, set }: RowWriteSql): { batch: string; single: string } {
  const when = `${orderStateCondition(rule.from, 'o')} AND (t.if_match IS NULL OR o.version = t.if_match)`
  const recorded = `bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM changed)')}
  ), recorded AS (
    ${recordEvents(changedOrders(rule.event))}
  )`
  const update = `UPDATE orders o SET ${orderStateAssignments(rule.to)}, ${set}, version = o.version + 1`
  return {
    batch: `WITH request AS (
      SELECT * FROM ${request} AS r(${columns})
    ), target AS (
      SELECT t.* FROM orders o JOIN request t ON t.order_id = o.id WHERE ${when} ORDER BY o.id FOR UPDATE OF o SKIP LOCKED
    ), changed AS (
      ${update} FROM target t WHERE o.id = t.order_id AND ${when} RETURNING ${CHANGED_ORDER_COLUMNS}
    ), ${recorded}
    SELECT true AS changed, changed.*, (SELECT version FROM bumped) AS data_version FROM changed
    UNION ALL
    SELECT false, ${ORDER_COLUMNS}, NULL, NULL, NULL, NULL FROM orders o JOIN request t ON t.order_id = o.id
    WHERE NOT (${when}) OR o.id NOT IN (SELECT id FROM changed)`,
    single: `WITH changed AS (
      ${update} FROM ${request} AS t(${columns}) WHERE o.id = t.order_id AND ${when} RETURNING ${CHANGED_ORDER_COLUMNS}
    ), ${recorded}
    SELECT changed.*, (SELECT version FROM bumped) AS data_version FROM changed`,
  }
}

/** The If-Match versions of a batch, NULL for the whole array when no write has one (as traceContextArrays). */
const expectedArray = (requests: readonly RowWrite[]): string | null =>
  requests.some((r) => r.expected !== undefined) ? intArray(requests.map((r) => r.expected ?? null)) : null

const IDS = { request: 'unnest($1::bigint[], $2::integer[], $3::text[], $4::text[])', columns: 'order_id, if_match, traceparent, tracestate' }
const idParams = (requests: readonly RowWrite[], traces: readonly (TraceContext | undefined)[]): unknown[] => [
  intArray(requests.map((r) => r.id)),
  expectedArray(requests),
  ...traceContextArrays(traces),
]

/** A kind of write from its rule, its SQL beside the rule's, and its requests' parameters. */
function rowWriteKind<Request extends RowWrite, Result>(
  rule: OrderWriteRule<Result>,
  sql: RowWriteSql,
  params: RowWriteKind<Request, Result>['params'],
): RowWriteKind<Request, Result> {
  return { rule, statements: rowWriteStatements(rule, sql), params }
}

/** pending → cancelled. */
export const CANCELS = rowWriteKind<CancelWrite, CancelResult>(
  CANCEL,
  {
    request: 'unnest($1::bigint[], $2::integer[], $3::bigint[], $4::text[], $5::text[], $6::text[])',
    columns: 'order_id, if_match, cancelled_by_key, reason, traceparent, tracestate',
    set: `cancelled_at = ${WRITE_TIME}, cancelled_by_key = t.cancelled_by_key, cancellation_reason = t.reason`,
  },
  (requests, traces) => [
    intArray(requests.map((r) => r.id)),
    expectedArray(requests),
    intArray(requests.map((r) => r.cancelledByKey)),
    textArray(requests.map((r) => r.reason)),
    ...traceContextArrays(traces),
  ],
)

/** pending → shipped. */
export const SHIPS = rowWriteKind<RowWrite, ShipResult>(SHIP, { ...IDS, set: `shipped_at = ${WRITE_TIME}` }, idParams)

/** shipped and not complete → complete. */
export const COMPLETES = rowWriteKind<RowWrite, CompleteResult>(COMPLETE, { ...IDS, set: `completed_at = ${WRITE_TIME}` }, idParams)
