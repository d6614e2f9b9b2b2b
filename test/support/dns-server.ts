import { createSocket } from 'node:dgram'
import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'

/**
 * What the server does with a name: answer with these addresses (A queries get the IPv4 ones, AAAA
 * the IPv6 ones, either may be none: NODATA), or 'drop' every query for it, as a black-holed
 * domain's servers do; or either of these per type. A name it has no entry for is NXDOMAIN.
 */
export type DnsAnswer = string[] | 'drop' | { A: string[] | 'drop'; AAAA: string[] | 'drop' }

export interface DnsServer {
  /** `127.0.0.1:PORT`, as WEBHOOK_DNS_SERVERS takes it. */
  address: string
  /** Sets what a name gets from now on (names are matched without case). */
  set(name: string, answer: DnsAnswer): void
  /** Every question received, `name TYPE` (A or AAAA), in order. */
  asked: string[]
  close(): Promise<void>
}

const A = 1
const AAAA = 28
const NXDOMAIN = 3

/**
 * A DNS server on UDP 127.0.0.1 that answers from `records`: enough of RFC 1035 for A and AAAA
 * questions, one per query, answered with TTL 0 so that nothing is kept between lookups.
 */
export async function dnsServer(records: Record<string, DnsAnswer> = {}): Promise<DnsServer> {
  const table = new Map<string, DnsAnswer>()
  const set = (name: string, answer: DnsAnswer): void => void table.set(name.toLowerCase().replace(/\.$/, ''), answer)
  for (const [name, answer] of Object.entries(records)) set(name, answer)
  const asked: string[] = []
  const socket = createSocket('udp4')
  socket.on('message', (query, peer) => {
    const question = readQuestion(query)
    if (question === undefined) return
    asked.push(`${question.name} ${question.type === AAAA ? 'AAAA' : question.type === A ? 'A' : question.type}`)
    const entry = table.get(question.name.toLowerCase())
    const answer = entry === undefined || typeof entry === 'string' || Array.isArray(entry) ? entry : question.type === A ? entry.A : entry.AAAA
    if (answer === 'drop') return
    const family = question.type === A ? 4 : question.type === AAAA ? 6 : 0
    const addresses = (answer ?? []).filter((address) => isIP(address) === family)
    socket.send(response(query, question.end, entry === undefined ? NXDOMAIN : 0, question.type, addresses), peer.port, peer.address)
  })
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve))
  return {
    address: `127.0.0.1:${socket.address().port}`,
    set,
    asked,
    close: () => new Promise<void>((resolve) => socket.close(resolve)),
  }
}

/** The query's first question: its name (labels joined by dots), type, and where it ends. */
function readQuestion(query: Buffer): { name: string; type: number; end: number } | undefined {
  const labels: string[] = []
  let offset = 12
  while (offset < query.length && query[offset] !== 0) {
    const length = query[offset]!
    labels.push(query.subarray(offset + 1, offset + 1 + length).toString('latin1'))
    offset += 1 + length
  }
  if (query.length < 12 || offset + 5 > query.length) return undefined
  return { name: labels.join('.'), type: query.readUInt16BE(offset + 1), end: offset + 5 }
}

/** The response to `query`: its id, its question copied, `rcode`, and one record per address. */
function response(query: Buffer, questionEnd: number, rcode: number, type: number, addresses: string[]): Buffer {
  const header = Buffer.alloc(12)
  query.copy(header, 0, 0, 2) // id
  // QR, the query's opcode and RD, AA; RA and the response code.
  header[2] = 0x80 | (query[2]! & 0x79) | 0x04
  header[3] = 0x80 | rcode
  header.writeUInt16BE(1, 4)
  header.writeUInt16BE(addresses.length, 6)
  const answers = addresses.map((address) => {
    const data = Buffer.from(ipaddr.parse(address).toByteArray())
    const record = Buffer.alloc(12)
    record.writeUInt16BE(0xc00c, 0) // the name: a pointer to the question's
    record.writeUInt16BE(type, 2)
    record.writeUInt16BE(1, 4) // IN
    record.writeUInt32BE(0, 6) // TTL
    record.writeUInt16BE(data.length, 10)
    return Buffer.concat([record, data])
  })
  return Buffer.concat([header, query.subarray(12, questionEnd), ...answers])
}
