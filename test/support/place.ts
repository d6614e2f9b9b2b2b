import { parseExact, type WireOrder } from './v2.js'

/** A v2 Order as placeOrder, shipOrder and completeOrder answer it, ids exact. */
interface WrittenOrder extends WireOrder {
  shippedAt?: string
  completedAt?: string
}

export interface Answer {
  status: number
  headers: Headers
  text: string
  /** The body parsed with ids exact (decimal strings); undefined for an empty body. */
  body: WrittenOrder & { code?: string; message?: string }
}

/** POST a JSON text (as given, byte for byte) to a v2 path; the answer read whole. */
export async function post(origin: string, key: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(`${origin}/v2${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body }),
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, text, body: text === '' ? (undefined as never) : parseExact(text) }
}

/** placeOrder with a body, and an Idempotency-Key when given. */
export function place(origin: string, key: string, body: string, idempotencyKey?: string): Promise<Answer> {
  return post(origin, key, '/store/orders', body, idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey })
}
