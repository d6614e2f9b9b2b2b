import type { OrderPageQuery } from '../domain/order-pages.js'

/** What differs between the stores' SQL for a page. */
export interface PageDialect {
  /** The select list, each column named as in the table (ship_date, cancelled_at as RFC 3339 text). */
  columns: string
  /** A boolean literal. */
  bool(value: boolean): string
}

/** A statement with named parameters (`@name`), and their values. */
export interface NamedStatement {
  sql: string
  params: Record<string, unknown>
}

/**
 * The statement of one v2 page, or undefined when no order can match (say `status=pending&complete=true`:
 * only a shipped order can be complete, a CHECK of both schemas).
 *
 * One branch per (status, complete) pair the filters allow, each `… ORDER BY id LIMIT n` with an
 * equality prefix of an index — (status, complete, id), or (pet_id, status, complete, id) with a
 * petId — so that every branch reads its rows already in id order from the keyset position on, and
 * stops after n. The branches are merged in id order (PostgreSQL: Merge Append; SQLite: MERGE
 * (UNION ALL)): a page reads at most n rows per branch, whatever the filters, never the table. A
 * ship date range is checked in each branch; where it is narrow the planner may rather read its
 * range of (status, complete, ship_date) and sort it. At most four branches.
 */
export function orderPageStatement(query: OrderPageQuery, dialect: PageDialect): NamedStatement | undefined {
  const { filters, after, limit } = query
  const params: Record<string, unknown> = { limit }
  const common: string[] = []
  if (filters.shipDateFrom !== undefined) {
    common.push('ship_date >= @shipDateFrom')
    params.shipDateFrom = filters.shipDateFrom
  }
  if (filters.shipDateTo !== undefined) {
    common.push('ship_date < @shipDateTo')
    params.shipDateTo = filters.shipDateTo
  }
  if (after !== undefined) {
    common.push('id > @after')
    params.after = after
  }
  const pet = filters.petId === undefined ? '' : 'pet_id = @petId AND '
  if (filters.petId !== undefined) params.petId = filters.petId
  const branches: string[] = []
  for (const status of filters.statuses) {
    for (const complete of filters.complete === undefined ? [false, true] : [filters.complete]) {
      if (complete && status !== 'shipped') continue
      const where = [`${pet}status = '${status}' AND complete = ${dialect.bool(complete)}`, ...common].join(' AND ')
      branches.push(`SELECT ${dialect.columns} FROM orders WHERE ${where} ORDER BY id LIMIT @limit`)
    }
  }
  if (branches.length === 0) return undefined
  if (branches.length === 1) return { sql: branches[0]!, params }
  const union = branches.map((branch, i) => `SELECT * FROM (${branch}) AS b${i}`).join(' UNION ALL ')
  return { sql: `${union} ORDER BY id LIMIT @limit`, params }
}
