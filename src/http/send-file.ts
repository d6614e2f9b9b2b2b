import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'

/** Read size: large reads keep up with loopback sockets. Two buffers per response: its memory bound. */
const CHUNK_BYTES = 1024 * 1024

/** Where a body's bytes are read from: a cached file, or a list fill that may still be growing. */
export interface BodySource {
  /** Copies bytes from `position` into `buffer`: how many (waiting for them if need be), 0 at the end. */
  read(buffer: Buffer, position: number): Promise<number>
  /** The body's length when known (a Content-Length was set), else undefined (chunked). */
  bytes: number | undefined
  /** Called once, when the response is over. */
  close(): void
}

/**
 * Sends the body read from `source` as the 200 body, with the headers set on `reply` so far, then
 * closes the source. Two buffers take turns: one is read into while the other is being written,
 * and a buffer is reused only once its write has been handed to the kernel. A stream of the file
 * would allocate a new buffer per chunk, ~90 MB per 1,000,000-order list, and the garbage
 * collections that this much short-lived external memory forces cost more than the copy itself.
 * However slow the client, the response holds these two buffers and no more.
 *
 * The reply is hijacked (Fastify's onResponse hooks still run: the request is logged and counted).
 * If the client goes away, a read fails or the send deadline passes, the connection is destroyed:
 * the status line is gone.
 */
export function sendBody(reply: FastifyReply, source: BodySource, deadlineMs: number): void {
  reply.hijack()
  const response = reply.raw
  if (response.destroyed) {
    source.close() // the client left while the body was being opened
    return
  }
  limitSendTime(response, deadlineMs)
  response.writeHead(200, reply.getHeaders() as OutgoingHttpHeaders)
  if (reply.request.method === 'HEAD') {
    response.end() // the headers say it all; Node would drop the body anyway
    source.close()
    return
  }
  const size = Math.min(CHUNK_BYTES, source.bytes ?? CHUNK_BYTES)
  const buffers = [Buffer.allocUnsafeSlow(size), Buffer.allocUnsafeSlow(size)]
  let gone = false
  const closed = new Promise<never>((_resolve, reject) =>
    response.once('close', () => {
      gone = true
      reject(new Error('the client went away'))
    }),
  )
  closed.catch(() => {}) // raced below; unobserved once the body is sent
  const write = (chunk: Buffer): Promise<void> =>
    Promise.race([new Promise<void>((resolve, reject) => response.write(chunk, (error) => (error ? reject(error) : resolve()))), closed])

  void (async () => {
    let position = 0
    let writing: Promise<void> = Promise.resolve()
    for (let turn = 0; ; turn++) {
      const buffer = buffers[turn % 2]!
      const bytesRead = await Promise.race([source.read(buffer, position), closed])
      if (bytesRead === 0) break
      position += bytesRead
      await writing // the other buffer's write is done: this one is free again next turn
      writing = write(buffer.subarray(0, bytesRead))
      writing.catch(() => {}) // awaited next turn; failing while a read is awaited is not unhandled
    }
    if (source.bytes !== undefined && position !== source.bytes) throw new Error('the cached list file is shorter than its size')
    await writing
    response.end()
  })()
    .catch((error: unknown) => {
      if (!gone) reply.log.warn({ err: error }, 'sending a list failed; connection closed')
      response.destroy()
    })
    .finally(() => source.close())
}

/**
 * Destroys the connection if the response has not been sent within `deadlineMs`: a client too slow
 * to take a list in that time keeps its file descriptor and buffers no longer.
 */
export function limitSendTime(response: ServerResponse, deadlineMs: number): void {
  const timer = setTimeout(() => response.destroy(), deadlineMs)
  timer.unref()
  response.once('close', () => clearTimeout(timer))
}
