/**
 * The CRC-32 of A followed by B, from the CRC-32s of A and B and the length of B: zlib's
 * crc32_combine (crc32.c), which Node does not expose. Lets the gzip list reuse a segment's CRC
 * instead of reading its bytes again (see GzipSegments).
 */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  return (multiplyModP(xPow8nModP(lengthB), crcA) ^ crcB) >>> 0
}

/** The reflected CRC-32 polynomial. */
const POLY = 0xedb88320

/** a·b modulo p, in the reflected bit order of the CRC (x^0 is the top bit). */
function multiplyModP(a: number, b: number): number {
  let m = 0x80000000
  let p = 0
  for (;;) {
    if ((a & m) !== 0) {
      p ^= b
      if ((a & (m - 1)) === 0) break
    }
    m >>>= 1
    b = b & 1 ? (b >>> 1) ^ POLY : b >>> 1
  }
  return p >>> 0
}

/** X_POW_2N[k] = x^(2^k) modulo p. */
const X_POW_2N: number[] = [0x40000000] // x^1
for (let k = 1; k < 32; k++) X_POW_2N.push(multiplyModP(X_POW_2N[k - 1]!, X_POW_2N[k - 1]!))

/** x^(8n) modulo p: appending n zero bytes. */
function xPow8nModP(n: number): number {
  let p = 0x80000000 // x^0
  for (let k = 3; n > 0; k++, n = Math.floor(n / 2)) {
    if (n % 2 === 1) p = multiplyModP(X_POW_2N[k % 32]!, p)
  }
  return p
}
