import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

// A caller's id is honoured only if it is short and plain, so it cannot forge log lines or headers.
const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,128}$/

export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id']
  return typeof given === 'string' && ACCEPTABLE.test(given) ? given : randomUUID()
}
