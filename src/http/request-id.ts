import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

// A caller's id is honoured only if it is short and plain, so it cannot forge log lines or headers.
const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,128}$/
// The id given to a request, kept on it for an answer written outside Fastify (a malformed body).
const ID = Symbol('requestId')

export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id']
  const id = typeof given === 'string' && ACCEPTABLE.test(given) ? given : randomUUID()
  ;(req as IncomingMessage & { [ID]?: string })[ID] = id
  return id
}

/** The id `requestId` gave `req`, or a new one if it gave none. */
export function requestIdOf(req: IncomingMessage): string {
  return (req as IncomingMessage & { [ID]?: string })[ID] ?? requestId(req)
}
