import { setTimeout as sleep } from 'node:timers/promises'
import { KEY_IN_USE, keyAnswer, keyLiveAfter, PLACED_STATUS, type StoredKey } from '../../domain/idempotency.js'
import { PlaceAdmission, PLACED_IDS, placedId } from '../../domain/order-places.js'
import type { PlaceRequest, PlaceResult } from '../../domain/orders.js'
import { metadataText } from '../../domain/order-metadata.js'
import { GroupCommit } from '../group-commit.js'
import { int8, intArray, textArray } from './parameters.js'
import type { Connection } from './connection.js'
import type { PostgresDatabase } from './database.js'
import { toOrderV2Record, type OrderV2Row } from '../rows.js'
import { ORDER_V2_JSON, orderV2Columns, utc } from './order-pages.js'
import type { TraceContext } from '../../trace-context.js'
import { bumpVersion, recordEvents, traceContextArrays } from './write-sql.js'

/** The record of an Idempotency-Key ($1 api_key_id, $2 key), as StoredKey has it. */
const FIND_KEY = `SELECT fingerprint, order_id AS "orderId", response_status AS "responseStatus", response_body AS "responseBody",
    ${utc('expires_at')} AS "expiresAt"
  FROM idempotency_keys WHERE api_key_id = $1 AND key = $2`

/** More places than this wait for the next batch. */
const MAX_BATCH = 1000

/** A place batch that met an import's new ids is tried again this many times, after these pauses. */
const PLACE_ATTEMPTS = 100
const PLACE_RETRY_MS = { first: 10, max: 250 }

/**
 * placeOrder on PostgreSQL: a place is admitted (domain/order-places.ts: refused at once, or, its key
 * held by another place, answered from the key's committed record), group-committed with the places of the same moment (../group-commit.ts: a batch is one
 * transaction, one data_version lock, one WAL flush), and answered once its batch has committed.
 */
export class PostgresPlaces {
  private readonly admission = new PlaceAdmission(async (apiKeyId, key) => {
    const { rows } = await this.database.read<StoredKey>(FIND_KEY, [int8(apiKeyId), key])
    return rows[0]
  })
  private readonly batches = new GroupCommit<PlaceRequest, PlaceResult>({
    maxBatch: MAX_BATCH,
    traceContexts: true,
    commit: (requests, traces) => this.commit(requests, traces),
  })

  constructor(private readonly database: PostgresDatabase) {}

  /** Refuses `request`, answers it from its key's record while another place holds the key, or queues it for the next batch; settles once that batch has committed. */
  submit(request: PlaceRequest): Promise<PlaceResult> {
    return this.admission.admit(request, (admitted) => this.batches.submit(admitted))
  }

  /** Waits until every place already requested has settled. */
  drain(): Promise<void> {
    return this.batches.drain()
  }

  /**
   * One batch of places in one transaction (placeInTransaction); resolves once committed. A batch
   * whose new ids an import took meanwhile rolled back, and is tried again in a new transaction once
   * the import has had time to commit. Not retried on a lost connection: the commit may have happened.
   */
  private async commit(requests: PlaceRequest[], traces: readonly (TraceContext | undefined)[]): Promise<PlaceResult[]> {
    for (let attempt = 1, pause = PLACE_RETRY_MS.first; ; attempt++, pause = Math.min(pause * 2, PLACE_RETRY_MS.max)) {
      try {
        const { results, version } = await this.database.transaction((connection) => placeInTransaction(connection, requests, traces, new Date()))
        // Only once committed: a version that never committed must not label a list.
        if (version !== undefined) this.database.versions.observe(version)
        return results
      } catch (error) {
        if (!mustRetryPlaces(error) || attempt >= PLACE_ATTEMPTS) throw error
        await sleep(pause)
      }
    }
  }
}

/**
 * How long the batch's inserts may wait for a row lock. The only rows they can wait for are an
 * import's, not yet committed, with the same new id; that import commits only after taking
 * data_version's lock, which the batch holds: waiting longer would only end in a deadlock. The batch
 * gives up instead, and is tried again (IdsTaken).
 */
const INSERT_LOCK_TIMEOUT = '50ms'

/**
 * The first statement of a batch's transaction. First, without waiting, the transaction-scoped
 * advisory lock of each Idempotency-Key (a hash of the API key id and the key; NULL, no lock, for a
 * place without one): a key whose lock another transaction holds is being placed by it, on this
 * instance or another, so that request is `key_in_use`. Then (LATERAL: only after those) the row
 * lock of data_version, which every write takes (its bump) and holds until COMMIT, so that this
 * batch's ids and event positions are ordered with every other write; not taken when no request is
 * left to place. Whatever a lock's previous holder committed is seen by the next statement's
 * snapshot, taken after this one.
 */
const PLACE_LOCKS = `SELECT k.obtained, set_config('lock_timeout', '${INSERT_LOCK_TIMEOUT}', true)
  FROM (
    SELECT ARRAY(SELECT pg_try_advisory_xact_lock(hashtextextended(c.api_key_id || ' ' || c.key, 0))
      FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS c(api_key_id, key, n) ORDER BY c.n) AS obtained
    OFFSET 0
  ) AS k
  LEFT JOIN LATERAL (
    SELECT version FROM data_version WHERE id = 1 AND true = ANY (SELECT coalesce(o, true) FROM unnest(k.obtained) AS o) FOR UPDATE
  ) AS locked ON true`

/**
 * The rest of the batch, in one statement whose snapshot is taken under those locks: a request whose
 * key has an unexpired record places nothing (`kept`, which keyAnswer then answers from the record
 * returned); the others (`to_place`, numbered `seq` in order) get the ids placedId gives, above every
 * id the store holds, as long as any is left. Each new order is inserted with its Idempotency-Key
 * record (an expired one replaced) and its `order.created` event, which keeps the request's trace
 * context ($9 and $10, traceContextArrays) and its metadata ($11), and the version is bumped if any
 * was. One row per request, in order: its order as inserted, or its record, or neither — ids
 * exhausted, or an id taken by an import meanwhile (`ON CONFLICT DO NOTHING`; the batch is tried
 * again).
 */
const PLACE_BATCH = `WITH request AS (
    SELECT * FROM unnest($1::bigint[], $2::integer[], $3::timestamptz[], $4::bigint[], $5::text[], $6::text[], $7::timestamptz[], $9::text[], $10::text[], $11::text[])
      WITH ORDINALITY AS r(pet_id, quantity, ship_date, api_key_id, key, fingerprint, expires_at, traceparent, tracestate, metadata, n)
  ), kept AS (
    SELECT r.n, k.fingerprint, k.order_id AS "orderId", k.response_status AS "responseStatus",
      k.response_body AS "responseBody", ${utc('k.expires_at')} AS "expiresAt"
    FROM request r JOIN idempotency_keys k ON k.api_key_id = r.api_key_id AND k.key = r.key
    WHERE k.expires_at > $14::timestamptz
  ), to_place AS (
    SELECT r.*, row_number() OVER (ORDER BY r.n) AS seq FROM request r WHERE r.n NOT IN (SELECT n FROM kept)
  ), top AS (
    SELECT greatest(max(id), $12::bigint) AS id FROM orders
  ), inserted AS (
    INSERT INTO orders (id, pet_id, quantity, ship_date, metadata)
    SELECT top.id + p.seq, p.pet_id, p.quantity, p.ship_date, p.metadata FROM to_place p CROSS JOIN top
    WHERE p.seq <= $13::bigint - top.id
    ORDER BY p.seq
    ON CONFLICT (id) DO NOTHING
    RETURNING ${orderV2Columns()}, ${ORDER_V2_JSON} AS json
  ), stored AS (
    INSERT INTO idempotency_keys (api_key_id, key, fingerprint, order_id, response_status, response_body, created_at, expires_at)
    SELECT p.api_key_id, p.key, p.fingerprint, i.id, ${PLACED_STATUS}, i.json, $8::timestamptz, p.expires_at
    FROM inserted i CROSS JOIN top JOIN to_place p ON p.seq = i.id - top.id
    WHERE p.key IS NOT NULL
    ON CONFLICT (api_key_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, order_id = excluded.order_id,
      response_status = excluded.response_status, response_body = excluded.response_body,
      created_at = excluded.created_at, expires_at = excluded.expires_at
  ), bumped AS (
    ${bumpVersion(' AND EXISTS (SELECT 1 FROM inserted)')}
  ), recorded AS (
    ${recordEvents(`SELECT i.id AS order_id, 'order.created' AS type, i.json, p.traceparent, p.tracestate
      FROM inserted i CROSS JOIN top JOIN to_place p ON p.seq = i.id - top.id ORDER BY i.id`)}
  )
  SELECT r.n, p.seq, (SELECT id FROM top) AS top, k.fingerprint, k."orderId", k."responseStatus", k."responseBody", k."expiresAt",
    i.*, (SELECT version FROM bumped) AS data_version
  FROM request r
  LEFT JOIN kept k ON k.n = r.n
  LEFT JOIN to_place p ON p.n = r.n
  LEFT JOIN inserted i ON i.id - (SELECT id FROM top) = p.seq
  ORDER BY r.n`

type PlacedRow = Partial<OrderV2Row> & Partial<StoredKey> & {
  seq: bigint | null
  top: bigint
  fingerprint: string | null
  data_version: bigint | null
}

/** An id the batch was to take was committed meanwhile (by an import), or is being: try it again. */
class IdsTaken extends Error {
  constructor() {
    super('an id of the batch was taken by a concurrent import')
  }
}

/** Whether `error` is a place batch that must be tried again in a new transaction. */
export function mustRetryPlaces(error: unknown): boolean {
  // 55P03 lock_not_available: an insert waited INSERT_LOCK_TIMEOUT for an import's new row.
  return error instanceof IdsTaken || (error as { code?: unknown } | null)?.code === '55P03'
}

/**
 * A batch of places in the transaction of `connection` (PLACE_LOCKS, then PLACE_BATCH), with each
 * request's trace context (`traces`, parallel to `requests`, for its event): a result per request,
 * in order, and the version it bumped to, if it placed anything (to be observed after COMMIT).
 * Throws IdsTaken when an id was taken meanwhile; the caller rolls back and tries again.
 */
export async function placeInTransaction(
  connection: Connection,
  requests: readonly PlaceRequest[],
  traces: readonly (TraceContext | undefined)[],
  now: Date,
): Promise<{ results: PlaceResult[]; version: bigint | undefined }> {
  const claims = requests.map((r) => r.idempotency)
  const { rows: locks } = await connection.query<{ obtained: (boolean | null)[] }>(PLACE_LOCKS, [
    intArray(claims.map((c) => c?.apiKeyId ?? null)),
    textArray(claims.map((c) => c?.key)),
  ])
  const obtained = locks[0]!.obtained
  const results: PlaceResult[] = requests.map(() => KEY_IN_USE)
  const placing = requests.flatMap((request, i) => (obtained[i] === false ? [] : [{ request, i }]))
  if (placing.length === 0) return { results, version: undefined }

  const orders = placing.map(({ request }) => request.order)
  const keys = placing.map(({ request }) => request.idempotency)
  const at = now.toISOString()
  const { rows } = await connection.query<PlacedRow>(PLACE_BATCH, [
    intArray(orders.map((o) => o.petId)),
    intArray(orders.map((o) => o.quantity)),
    textArray(orders.map((o) => o.shipDate)),
    intArray(keys.map((k) => k?.apiKeyId ?? null)),
    textArray(keys.map((k) => k?.key)),
    textArray(keys.map((k) => k?.fingerprint)),
    textArray(keys.map((k) => k?.expiresAt.toISOString())),
    at,
    ...traceContextArrays(placing.map(({ i }) => traces[i])),
    // NULL for the whole array when no order has metadata, as for the trace arrays.
    orders.some((o) => o.metadata !== undefined && o.metadata !== null) ? textArray(orders.map((o) => metadataText(o.metadata ?? null))) : null,
    // The domain's rules, decided in SQL only because they must be under this batch's locks:
    int8(PLACED_IDS.after), // $12, $13: placedId's ids, from max(id) as data_version's lock holds it
    int8(PLACED_IDS.last),
    keyLiveAfter(at), // $14: which records still answer, picked under their keys' locks with the places they hold back
  ])
  let version: bigint | undefined
  rows.forEach((row, n) => {
    const { request, i } = placing[n]!
    let answer: PlaceResult | undefined
    if (row.id !== undefined && row.id !== null) {
      version = row.data_version ?? version
      results[i] = { outcome: 'placed', order: toOrderV2Record(row as OrderV2Row) }
    } else if (row.fingerprint !== null && (answer = keyAnswer(row as StoredKey, request.idempotency!.fingerprint, at)) !== undefined) {
      results[i] = answer
    } else if (placedId(row.top, row.seq!) === undefined) {
      results[i] = { outcome: 'ids_exhausted' }
    } else {
      throw new IdsTaken()
    }
  })
  return { results, version }
}
