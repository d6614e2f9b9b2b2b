import { crc32, constants as zlib, deflateRaw } from 'node:zlib'
import { promisify } from 'node:util'
import { crc32Combine } from './crc32-combine.js'

const deflateRawAsync = promisify(deflateRaw)

/**
 * The gzip body of the order list, assembled from segments deflated one by one, so that a segment
 * whose bytes have not changed since the last list is not deflated again.
 *
 * On two cores, deflating the 1M list at level 1 costs more CPU than the whole uncompressed
 * response (docs/benchmarks.md, comparison 3), while a change to orders (a cancel) touches one row.
 * Each segment is its own raw deflate stream, ended with a sync flush: byte-aligned, not final and
 * referring to nothing before it, so segments concatenate into one valid deflate stream (RFC 1951)
 * whatever list they were first compressed in. The gzip member around them (RFC 1952) is written
 * here because zlib's streams cannot take blocks compressed elsewhere: a header, the blocks, an
 * empty final block, the CRC-32 and the length of the whole list.
 *
 * A block is reused only when its segment's bytes equal, byte for byte, those it was compressed
 * from: the segments of the last complete list are kept in memory, bounded by `maxBytes` (raw and
 * compressed together; what does not fit is simply compressed again next time). One list at a time
 * collects the segments that will replace them (concurrent gzip lists still reuse, but keep
 * nothing), so at most the changed segments of one list are held beside the kept ones: under
 * `2 × maxBytes` in all, and nearly `maxBytes` when little changed.
 */
export class GzipSegments {
  private previous = new Map<string, Segment>()
  /** Whether a list is collecting the segments that will replace `previous`. */
  private collecting = false

  /** `counted` hears of each segment: deflated, or reused from the last list (metrics, tests). */
  constructor(
    readonly maxBytes: number,
    private readonly counted: (outcome: 'deflated' | 'reused') => void = () => {},
  ) {}

  /** The gzip encoding of `body`, a JSON array of order objects, as an async iterable of chunks. */
  async *encode(body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    const collects = this.maxBytes > 0 && !this.collecting
    if (collects) this.collecting = true
    const kept = new Map<string, Segment>()
    let keptBytes = 0
    let crc = 0
    let length = 0
    // Blocks being deflated on the thread pool, in order: a few run ahead of the one being sent,
    // so that the database and the compressor work at the same time.
    const ahead: Promise<Buffer>[] = []
    try {
      yield GZIP_HEADER
      for await (const { key, parts, bytes } of segments(body)) {
        const segment = this.compress(key, parts, bytes)
        crc = crc32Combine(crc, segment.crc, bytes)
        length += bytes
        const block = segment.done.then((done) => {
          const size = done.raw.length + done.block.length
          // Keys are unique in a list of ascending ids; should one repeat, the first is kept, once.
          if (collects && !kept.has(key) && keptBytes + size <= this.maxBytes) {
            kept.set(key, done)
            keptBytes += size
          }
          return done.block
        })
        // A deflate that fails while this list waits on the client or the database must not be an
        // unhandled rejection (which ends the process): its error is rethrown when its turn comes.
        block.catch(() => {})
        ahead.push(block)
        if (ahead.length >= BLOCKS_AHEAD) yield await ahead.shift()!
      }
      while (ahead.length > 0) yield await ahead.shift()!
      const trailer = Buffer.allocUnsafe(10)
      FINAL_EMPTY_BLOCK.copy(trailer, 0)
      trailer.writeUInt32LE(crc, 2)
      trailer.writeUInt32LE(length % 2 ** 32, 6) // ISIZE is the length modulo 2^32
      if (collects) this.previous = kept // only a list sent whole replaces the last one
      yield trailer
    } finally {
      if (collects) this.collecting = false
    }
  }

  /** The segment's CRC-32 at once, and the segment when its block is ready. */
  private compress(key: string, parts: Buffer[], bytes: number): { crc: number; done: Promise<Segment> } {
    const before = this.previous.get(key)
    if (before !== undefined && equal(before.raw, parts, bytes)) {
      this.counted('reused')
      return { crc: before.crc, done: Promise.resolve(before) }
    }
    this.counted('deflated')
    const raw = parts.length === 1 ? parts[0]! : Buffer.concat(parts, bytes)
    const crc = crc32(raw)
    return { crc, done: deflateRawAsync(raw, DEFLATE_OPTIONS).then((block) => ({ raw, crc, block })) }
  }
}

/** Whether `parts`, `bytes` long together, are the bytes of `raw` (compared where they lie, not copied). */
function equal(raw: Buffer, parts: Buffer[], bytes: number): boolean {
  if (raw.length !== bytes) return false
  let offset = 0
  for (const part of parts) {
    if (!part.equals(raw.subarray(offset, offset + part.length))) return false
    offset += part.length
  }
  return true
}

interface Segment {
  /** The uncompressed bytes, to compare the next list's segment of the same key with. */
  raw: Buffer
  /** Their CRC-32 (the gzip trailer's is combined from the segments'). */
  crc: number
  /** Their raw deflate stream, ended by a sync flush. */
  block: Buffer
}

const DEFLATE_OPTIONS = { level: 1, finishFlush: zlib.Z_SYNC_FLUSH }
const BLOCKS_AHEAD = 4
/** ID1 ID2, CM deflate, no flags, no MTIME, XFL 4 (fastest), OS 3 (Unix): what zlib writes at level 1. */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 3])
/** BFINAL set, fixed Huffman codes, and only the end-of-block code. */
const FINAL_EMPTY_BLOCK = Buffer.from([3, 0])

/**
 * A segment ends before an order whose id ends in `0000` (about every 10,000 orders, ~850 KB, when
 * ids are dense), once it holds at least MIN_SEGMENT_BYTES. Cutting at ids, not at byte or row
 * counts, keeps the segments after a change where they were: a cancel removes an order from the
 * list and shifts every byte after it. Past MAX_SEGMENT_BYTES without such an id (sparse ids), a
 * segment ends at the next order. The boundaries only decide what can be reused, never what is
 * sent: a segment is reused only when its bytes are equal.
 */
const ID_SUFFIX = Buffer.from('0000,"')
const ORDER_START = Buffer.from('{"id":')
const MIN_SEGMENT_BYTES = 64 * 1024
const MAX_SEGMENT_BYTES = 4 * 1024 * 1024

/**
 * Cuts the body, as the route writes it (`[`, pages of whole orders joined by `,`, `]`; each a
 * separate buffer, see jsonArray), into segments keyed by the id that starts them. A segment is the
 * pieces of the pages it spans, not a copy: pages are never changed once handed over.
 */
export async function* segments(body: AsyncIterable<Buffer>): AsyncGenerator<{ key: string; parts: Buffer[]; bytes: number }> {
  let parts: Buffer[] = []
  let bytes = 0
  let key = '' // the first segment starts with `[`
  for await (const chunk of body) {
    let from = 0 // start of the part of `chunk` not yet in `parts`
    for (let cut = nextCut(chunk, from, bytes); cut !== -1; cut = nextCut(chunk, from, bytes)) {
      if (cut > from) parts.push(chunk.subarray(from, cut))
      yield { key, parts, bytes: bytes + cut - from }
      key = idAt(chunk, cut) ?? '' // a key only finds a candidate: reuse still needs equal bytes
      parts = []
      bytes = 0
      from = cut
    }
    if (from < chunk.length) {
      parts.push(from === 0 ? chunk : chunk.subarray(from))
      bytes += chunk.length - from
    }
  }
  if (parts.length > 0) yield { key, parts, bytes }
}

/**
 * Where in `chunk`, at or after `from`, the next segment starts (the `{` of an order), given
 * `carried` bytes of the current segment in earlier chunks; -1 if it does not start in `chunk`.
 */
function nextCut(chunk: Buffer, from: number, carried: number): number {
  const minimum = from + Math.max(0, MIN_SEGMENT_BYTES - carried)
  if (minimum >= chunk.length) return -1
  const scan = from > 0 || mayHoldBoundary(chunk) ? minimum : -1
  for (let hit = scan === -1 ? -1 : chunk.indexOf(ID_SUFFIX, scan); hit !== -1; hit = chunk.indexOf(ID_SUFFIX, hit + 1)) {
    let digits = hit
    while (digits > 0 && chunk[digits - 1]! >= 0x30 && chunk[digits - 1]! <= 0x39) digits--
    if (digits > 0 && chunk[digits - 1] === 0x2d) digits-- // a negative id
    const start = digits - ORDER_START.length
    if (start >= minimum && ORDER_START.equals(chunk.subarray(start, digits))) return start
  }
  const overflow = from + Math.max(0, MAX_SEGMENT_BYTES - carried)
  if (overflow >= chunk.length) return -1
  return chunk.indexOf(ORDER_START, overflow)
}

/**
 * False when `chunk` is orders in ascending id order whose ids cannot end in 0000: its first and
 * last ids differ only in their last four digits, and neither ends in 0000 (the first of positive
 * ids, the last of negative ones, would be the only one that can). Such a chunk (nine pages of ten
 * with dense ids) is not searched at all.
 */
function mayHoldBoundary(chunk: Buffer): boolean {
  const first = idAt(chunk, 0)
  const last = idAt(chunk, chunk.lastIndexOf(ORDER_START))
  if (first === undefined || last === undefined) return true
  return first.endsWith('0000') || last.endsWith('0000') || first.length !== last.length || first.slice(0, -4) !== last.slice(0, -4)
}

/** The digits of the id of the order starting at `at`, or undefined if no order starts there. */
function idAt(chunk: Buffer, at: number): string | undefined {
  if (at < 0 || !ORDER_START.equals(chunk.subarray(at, at + ORDER_START.length))) return undefined
  const digits = at + ORDER_START.length
  const end = chunk.indexOf(0x2c, digits)
  if (end === -1 || end - digits > MAX_ID_LENGTH) return undefined
  const id = chunk.toString('latin1', digits, end)
  return /^-?[0-9]+$/.test(id) ? id : undefined
}

const MAX_ID_LENGTH = 20 // -9223372036854775808
