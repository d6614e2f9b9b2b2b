import { connect } from 'node:net'

/** Sends raw bytes to the server and returns everything it answers until it closes (or `timeoutMs`). */
export async function rawRequest(origin: string, bytes: string | Buffer, timeoutMs = 3000): Promise<string> {
  return (await rawExchange(origin, bytes, timeoutMs)).raw
}

/**
 * Sends raw bytes to the server: everything it answers until the connection closes, and whether the
 * server closed it (rather than this side, after `timeoutMs`).
 */
export function rawExchange(origin: string, bytes: string | Buffer, timeoutMs: number): Promise<{ raw: string; closedByServer: boolean }> {
  const { hostname, port } = new URL(origin)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    const chunks: Buffer[] = []
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      socket.destroy()
    }, timeoutMs)
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // A reset after the answer was sent still leaves the answer to read.
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') return
      clearTimeout(timer)
      reject(error)
    })
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ raw: Buffer.concat(chunks).toString('latin1'), closedByServer: !timedOut })
    })
    socket.write(bytes)
  })
}

/** The status and JSON body of the first response in a raw answer. */
export function parseRawResponse(text: string): { status: number; headers: string; body: unknown } {
  const match = /^HTTP\/1\.1 (\d{3}) [^\r]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(text)
  if (match === null) throw new Error(`not an HTTP response: ${JSON.stringify(text.slice(0, 200))}`)
  const headers = match[2]!
  let body = match[3]!
  if (/transfer-encoding: chunked/i.test(headers)) body = body.replace(/^[0-9a-f]+\r\n/i, '').replace(/\r\n0\r\n\r\n$/, '')
  const length = /content-length: (\d+)/i.exec(headers)
  if (length !== null) body = body.slice(0, Number(length[1]))
  return { status: Number(match[1]), headers, body: body === '' ? undefined : JSON.parse(body) }
}
