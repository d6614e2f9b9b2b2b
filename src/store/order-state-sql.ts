import type { OrderState } from '../domain/order-writes.js'

// A conditional write's states (../domain/order-writes.ts) as SQL both stores run: SQLite reads TRUE
// and FALSE as 1 and 0, which its complete column holds. The values are the domain's constants, never
// a request's.

/** The condition an order (its columns qualified by `table`, when given) must meet to be in `state`. */
export function orderStateCondition(state: OrderState, table?: string): string {
  const column = (name: string): string => (table === undefined ? name : `${table}.${name}`)
  return orderStateTerms(state, column).join(' AND ')
}

/** The assignments that put an order in `state`, for an UPDATE's SET. */
export const orderStateAssignments = (state: OrderState): string => orderStateTerms(state, (name) => name).join(', ')

function orderStateTerms(state: OrderState, column: (name: string) => string): string[] {
  const terms: string[] = []
  if (state.status !== undefined) terms.push(`${column('status')} = '${state.status}'`)
  if (state.complete !== undefined) terms.push(`${column('complete')} = ${state.complete ? 'TRUE' : 'FALSE'}`)
  return terms
}
