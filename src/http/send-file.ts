import type { FileHandle } from 'node:fs/promises'
import type { OutgoingHttpHeaders } from 'node:http'
import type { FastifyReply } from 'fastify'

/** Read size: large reads keep up with loopback sockets. */
const CHUNK_BYTES = 1024 * 1024

/**
 * Sends `bytes` bytes of an open file as the 200 body, with the headers set on `reply` so far, and
 * closes the file. Two buffers take turns: one is read into while the other is being written, and a
 * buffer is reused only once its write has been handed to the kernel. A stream of the file would
 * allocate a new buffer per chunk, ~90 MB per 1,000,000-order list, and the garbage collections
 * that this much short-lived external memory forces cost more than the copy itself.
 *
 * The reply is hijacked (Fastify's onResponse hooks still run: the request is logged and counted).
 * If the client goes away or a read fails, the connection is destroyed: the status line is gone.
 */
export function sendFile(reply: FastifyReply, file: FileHandle, bytes: number): void {
  reply.hijack()
  const response = reply.raw
  if (response.destroyed) {
    void file.close().catch(() => {}) // the client left while the file was being opened
    return
  }
  response.writeHead(200, reply.getHeaders() as OutgoingHttpHeaders)
  if (reply.request.method === 'HEAD') {
    response.end() // the headers say it all; Node would drop the body anyway
    void file.close().catch(() => {})
    return
  }
  const size = Math.min(CHUNK_BYTES, bytes)
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
    for (let turn = 0; position < bytes; turn++) {
      const buffer = buffers[turn % 2]!
      const { bytesRead } = await file.read(buffer, 0, Math.min(buffer.length, bytes - position), position)
      if (bytesRead === 0) throw new Error('the cached list file is shorter than its size')
      position += bytesRead
      await writing // the other buffer's write is done: this one is free again next turn
      writing = write(buffer.subarray(0, bytesRead))
      writing.catch(() => {}) // awaited next turn; failing while a read is awaited is not unhandled
    }
    await writing
    response.end()
  })()
    .catch((error: unknown) => {
      if (!gone) reply.log.warn({ err: error }, 'sending a cached list failed; connection closed')
      response.destroy()
    })
    .finally(() => void file.close().catch(() => {}))
}
