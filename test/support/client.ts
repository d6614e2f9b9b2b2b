import assert from 'node:assert/strict'
// The client's workspace package, as a user imports it: its built dist (npm run build first).
import { PetstoreApiError } from '@petstore-orders/client'

/** Runs `call`, expecting it to reject with a PetstoreApiError of this status and code, with a message. */
export async function expectApiError(call: Promise<unknown>, status: number, code: string): Promise<PetstoreApiError> {
  const error = await call.then(
    () => assert.fail(`expected ${status} ${code}, the call succeeded`),
    (error: unknown) => error,
  )
  assert.ok(error instanceof PetstoreApiError, `not a PetstoreApiError: ${String(error)}`)
  assert.ok(error instanceof Error)
  assert.equal(error.name, 'PetstoreApiError')
  assert.equal(error.status, status, error.message)
  assert.equal(error.code, code, error.message)
  assert.ok(error.message.length > 0)
  return error
}
