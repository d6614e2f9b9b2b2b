import { createHash, createHmac, timingSafeEqual } from 'node:crypto'
import { canonicalFilters, type OrderFilters } from '../domain/order-pages.js'
import { ApiError } from '../errors.js'

// 2: the digest is of every filter key (canonicalFilters); a version-1 cursor digested a fixed list.
const VERSION = 2
const DIGEST_BYTES = 16
const TAG_BYTES = 16
// version (1) | digest of the filters (16) | last id, int64 big-endian (8) | HMAC-SHA256 tag, truncated (16)
const PAYLOAD_BYTES = 1 + DIGEST_BYTES + 8
const CURSOR_BYTES = PAYLOAD_BYTES + TAG_BYTES

/**
 * Cursors of the v2 list: opaque, needing no server state, bound to their filters, tamper-evident.
 * A cursor is base64url of a version byte, a digest of the canonical filters (every key given), the
 * last id of the page and an HMAC-SHA256 tag of all three, keyed by the database's secret (every
 * instance shares it; it survives restarts). `limit` is not part of it, so it may change between pages.
 */
export class Cursors {
  constructor(private readonly secret: Buffer) {
    if (secret.length < 16) throw new Error('the cursor secret must have at least 16 bytes')
  }

  encode(filters: OrderFilters, lastId: bigint): string {
    const payload = Buffer.alloc(PAYLOAD_BYTES)
    payload.writeUInt8(VERSION, 0)
    filtersDigest(filters).copy(payload, 1)
    payload.writeBigInt64BE(lastId, 1 + DIGEST_BYTES)
    return Buffer.concat([payload, this.tag(payload)]).toString('base64url')
  }

  /** The last id of the page the cursor continues; 400 `invalid_cursor` unless it is genuine and for these filters. */
  decode(cursor: string, filters: OrderFilters): bigint {
    const bytes = Buffer.from(cursor, 'base64url')
    // Only the canonical encoding: any other spelling of the same bytes is not from this API.
    if (bytes.length !== CURSOR_BYTES || bytes.toString('base64url') !== cursor) throw invalid('The cursor is not one this API issued.')
    const payload = bytes.subarray(0, PAYLOAD_BYTES)
    if (!timingSafeEqual(bytes.subarray(PAYLOAD_BYTES), this.tag(payload))) throw invalid('The cursor is not one this API issued, or it was altered.')
    if (payload.readUInt8(0) !== VERSION) throw invalid('The cursor was issued by another version of this API: start the walk again.')
    if (!payload.subarray(1, 1 + DIGEST_BYTES).equals(filtersDigest(filters))) {
      throw invalid('The cursor was issued for other filters: send the same status, petId, complete, shipDateFrom, shipDateTo and metadata[…] as for the page it came from.')
    }
    return payload.readBigInt64BE(1 + DIGEST_BYTES)
  }

  private tag(payload: Buffer): Buffer {
    return createHmac('sha256', this.secret).update('petstore-orders v2 list cursor\0').update(payload).digest().subarray(0, TAG_BYTES)
  }
}

function invalid(message: string): ApiError {
  return new ApiError('invalid_cursor', message)
}

/** The filters' canonical text (every key given, values normalised: canonicalFilters), digested. */
export function filtersDigest(filters: OrderFilters): Buffer {
  return createHash('sha256').update(canonicalFilters(filters)).digest().subarray(0, DIGEST_BYTES)
}
