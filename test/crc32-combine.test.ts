import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { it } from 'node:test'
import { crc32 } from 'node:zlib'
import { crc32Combine } from '../src/http/crc32-combine.js'

it('crc32Combine gives the CRC-32 of the concatenation, for any lengths', () => {
  const data = randomBytes(3 * 1024 * 1024 + 17)
  for (const [cut, end] of [
    [0, 0],
    [0, 1],
    [1, 1],
    [5, 6],
    [1000, 1001],
    [4096, 70_000],
    [1, data.length],
    [2 * 1024 * 1024, data.length],
  ] as const) {
    const a = data.subarray(0, cut)
    const b = data.subarray(cut, end)
    assert.equal(crc32Combine(crc32(a), crc32(b), b.length), crc32(data.subarray(0, end)), `${cut} + ${end - cut} bytes`)
  }
})
