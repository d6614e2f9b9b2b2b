import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { gunzipSync } from 'node:zlib'
import { GzipSegments, segments } from '../src/http/gzip-segments.js'

interface Order {
  id: number
  quantity: number
}

function orders(ids: Iterable<number>): Order[] {
  return [...ids].map((id) => ({ id, quantity: (id % 7) + 1 }))
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i)
}

/** The list body as the route hands it over: `[`, pages of whole orders joined by `,`, `]`, each a buffer. */
function body(list: readonly Order[], pageSize = 1000): Buffer[] {
  const json = list.map((o) => `{"id":${o.id},"petId":${o.id % 913},"quantity":${o.quantity},"shipDate":"2026-01-01T00:00:00.000Z","status":"placed","complete":false}`)
  const chunks = [Buffer.from('[')]
  for (let i = 0; i < json.length; i += pageSize) {
    if (i > 0) chunks.push(Buffer.from(','))
    chunks.push(Buffer.from(json.slice(i, i + pageSize).join(',')))
  }
  chunks.push(Buffer.from(']'))
  return chunks
}

async function* from(chunks: Buffer[]): AsyncGenerator<Buffer> {
  yield* chunks
}

/** A GzipSegments that counts the segments it deflates and reuses. */
function counting(maxBytes: number): GzipSegments & { counts: { deflated: number; reused: number } } {
  const counts = { deflated: 0, reused: 0 }
  return Object.assign(new GzipSegments(maxBytes, (outcome) => counts[outcome]++), { counts })
}

/** The gzip body, and how many segments this encoding deflated and reused. */
async function encode(gzip: ReturnType<typeof counting>, chunks: Buffer[]): Promise<{ gz: Buffer; deflated: number; reused: number }> {
  const before = { ...gzip.counts }
  const out: Buffer[] = []
  for await (const chunk of gzip.encode(from(chunks))) out.push(chunk)
  return { gz: Buffer.concat(out), deflated: gzip.counts.deflated - before.deflated, reused: gzip.counts.reused - before.reused }
}

async function segmentsOf(chunks: Buffer[]): Promise<{ key: string; bytes: Buffer }[]> {
  const all: { key: string; bytes: Buffer }[] = []
  for await (const { key, parts, bytes } of segments(from(chunks))) {
    const joined = Buffer.concat(parts)
    assert.equal(joined.length, bytes)
    all.push({ key, bytes: joined })
  }
  return all
}

const MAX_BYTES = 256 * 1024 * 1024

describe('GzipSegments (the gzip list, deflated segment by segment)', () => {
  it('is a gzip body that decodes to the list, whatever its length and pages', async () => {
    for (const [list, pageSize] of [
      [[], 1000],
      [orders([1]), 1000],
      [orders(range(1, 25_000)), 1000],
      [orders(range(1, 25_000)), 7],
      [orders(range(1, 25_000)), 25_000],
      [orders(range(9_990, 30_010)), 333],
    ] as const) {
      const chunks = body(list, pageSize)
      const { gz } = await encode(counting(MAX_BYTES), chunks)
      assert.deepEqual(gunzipSync(gz), Buffer.concat(chunks), `${list.length} orders in pages of ${pageSize}`)
    }
  })

  it('cuts before the orders whose id ends in 0000, keyed by that id', async () => {
    const chunks = body(orders(range(1, 35_000)))
    const cut = await segmentsOf(chunks)
    assert.deepEqual(
      cut.map((segment) => segment.key),
      ['', '10000', '20000', '30000'],
    )
    assert.ok(cut.slice(1).every((segment) => segment.bytes.toString().startsWith(`{"id":${segment.key},`)))
    assert.deepEqual(Buffer.concat(cut.map((segment) => segment.bytes)), Buffer.concat(chunks))
  })

  it('cuts before negative ids ending in 0000 too', async () => {
    const chunks = body(orders(range(-35_000, -1)))
    const cut = await segmentsOf(chunks)
    assert.deepEqual(
      cut.map((segment) => segment.key),
      ['', '-30000', '-20000', '-10000'],
    )
    assert.deepEqual(Buffer.concat(cut.map((segment) => segment.bytes)), Buffer.concat(chunks))
  })

  it('still cuts, at most about every 4 MiB, when no id ends in 0000', async () => {
    const chunks = body(orders(range(1, 60_000).map((n) => n * 10_000 + 7)), 500) // ~7.6 MB
    const cut = await segmentsOf(chunks)
    assert.ok(cut.length >= 2, `${cut.length} segments`)
    assert.ok(cut.every((segment) => segment.bytes.length <= 4 * 1024 * 1024 + 200))
    assert.deepEqual(Buffer.concat(cut.map((segment) => segment.bytes)), Buffer.concat(chunks))
  })

  it('keeps every byte, cut wherever the chunks are cut', async () => {
    const whole = Buffer.concat(body(orders(range(1, 30_000))))
    for (const step of [1_000, 65_537, 300_001]) {
      const chunks: Buffer[] = []
      for (let at = 0; at < whole.length; at += step) chunks.push(whole.subarray(at, at + step))
      const cut = await segmentsOf(chunks)
      assert.deepEqual(Buffer.concat(cut.map((segment) => segment.bytes)), whole, `chunks of ${step}`)
    }
  })

  it('after a cancel, deflates only the segment the order left, and the body decodes to the new list', async () => {
    const gzip = counting(MAX_BYTES)
    const before = orders(range(1, 45_000))
    const first = await encode(gzip, body(before))
    assert.deepEqual({ deflated: first.deflated, reused: first.reused }, { deflated: 5, reused: 0 })

    const after = before.filter((o) => o.id !== 23_456)
    const second = await encode(gzip, body(after))
    assert.deepEqual({ deflated: second.deflated, reused: second.reused }, { deflated: 1, reused: 4 })
    assert.deepEqual(gunzipSync(second.gz), Buffer.concat(body(after)))

    const again = await encode(gzip, body(after))
    assert.deepEqual({ deflated: again.deflated, reused: again.reused }, { deflated: 0, reused: 5 })
    assert.deepEqual(again.gz, second.gz)
  })

  it('sees a change that keeps the length (a quantity 2 → 3): reuse is by equal bytes, not by size', async () => {
    const gzip = counting(MAX_BYTES)
    const list = orders(range(1, 25_000))
    await encode(gzip, body(list))
    const changed = list.map((o) => (o.id === 15_001 ? { ...o, quantity: o.quantity === 9 ? 8 : o.quantity + 1 } : o))
    assert.equal(Buffer.concat(body(changed)).length, Buffer.concat(body(list)).length)
    const second = await encode(gzip, body(changed))
    assert.deepEqual({ deflated: second.deflated, reused: second.reused }, { deflated: 1, reused: 2 })
    assert.deepEqual(gunzipSync(second.gz), Buffer.concat(body(changed)))
  })

  it('keeps no more than maxBytes of segments: with 0, every list is deflated whole', async () => {
    const gzip = counting(0)
    const list = body(orders(range(1, 25_000)))
    await encode(gzip, list)
    const second = await encode(gzip, list)
    assert.deepEqual({ deflated: second.deflated, reused: second.reused }, { deflated: 3, reused: 0 })

    // Room for about one segment (~1.4 MB raw and compressed): the first is kept, the rest are not.
    const small = counting(1_500_000)
    await encode(small, list)
    const next = await encode(small, list)
    assert.deepEqual({ deflated: next.deflated, reused: next.reused }, { deflated: 2, reused: 1 })
  })

  it('lets one list at a time collect the segments to keep; the others reuse but keep nothing', async () => {
    const gzip = counting(MAX_BYTES)
    const a = body(orders(range(1, 25_000)))
    const b = body(orders(range(1, 25_000)).filter((o) => o.id !== 5))
    const c = body(orders(range(1, 25_000)).filter((o) => o.id !== 15_005))
    await encode(gzip, a)
    const collecting = gzip.encode(from(b))
    const out: Buffer[] = [(await collecting.next()).value as Buffer] // B collects from here on
    const meanwhile = await encode(gzip, c) // reuses A's segments, keeps nothing
    assert.deepEqual({ deflated: meanwhile.deflated, reused: meanwhile.reused }, { deflated: 1, reused: 2 })
    assert.deepEqual(gunzipSync(meanwhile.gz), Buffer.concat(c))
    const stillA = await encode(gzip, a) // C did not replace A's segments
    assert.deepEqual({ deflated: stillA.deflated, reused: stillA.reused }, { deflated: 0, reused: 3 })
    for await (const chunk of collecting) out.push(chunk as Buffer)
    assert.deepEqual(gunzipSync(Buffer.concat(out)), Buffer.concat(b))
    const again = await encode(gzip, b) // B's segments were kept, not C's
    assert.deepEqual({ deflated: again.deflated, reused: again.reused }, { deflated: 0, reused: 3 })
  })

  it('keeps the segments of the last list sent whole, not of one abandoned midway', async () => {
    const gzip = counting(MAX_BYTES)
    const list = body(orders(range(1, 25_000)))
    await encode(gzip, list)
    const other = gzip.encode(from(body(orders(range(100_001, 125_000)))))
    await other.next() // the header
    await other.next() // a first block
    await other.return(undefined) // the client went away
    const again = await encode(gzip, list)
    assert.deepEqual({ deflated: again.deflated, reused: again.reused }, { deflated: 0, reused: 3 })
  })
})
