import assert from 'node:assert/strict'
import { syncBuiltinESMExports } from 'node:module'
import { it } from 'node:test'
import zlib from 'node:zlib'

// A deflate that fails (zlib's Z_MEM_ERROR, under memory pressure) cannot be caused with valid input:
// this file, a process of its own, makes the third deflateRaw call fail before the module is loaded.
const deflateRaw = zlib.deflateRaw
let calls = 0
Object.assign(zlib, {
  deflateRaw: (input: Buffer, options: zlib.ZlibOptions, callback: (error: Error | null, result: Buffer) => void) => {
    if (++calls === 3) setTimeout(() => callback(new Error('simulated Z_MEM_ERROR'), Buffer.alloc(0)), 10)
    else deflateRaw(input, options, callback)
  },
})
syncBuiltinESMExports()
const { GzipSegments } = await import('../src/http/gzip-segments.js')

it('a failed deflate fails the list, while the client is slow, without an unhandled rejection', async () => {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  try {
    const order = (id: number): string => `{"id":${id},"petId":1,"quantity":1,"status":"placed","complete":false}`
    async function* body(): AsyncGenerator<Buffer> {
      yield Buffer.from('[')
      for (let page = 0; page < 60; page++) {
        if (page > 0) yield Buffer.from(',')
        yield Buffer.from(Array.from({ length: 1000 }, (_, i) => order(page * 1000 + i + 1)).join(','))
      }
      yield Buffer.from(']')
    }
    const slowClient = async (): Promise<void> => {
      const chunks = new GzipSegments(1 << 30).encode(body())
      while ((await chunks.next()).done !== true) await new Promise((resolve) => setTimeout(resolve, 30))
    }
    await assert.rejects(slowClient(), /simulated Z_MEM_ERROR/)
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(unhandled, [])
  } finally {
    process.off('unhandledRejection', onUnhandled)
  }
})
