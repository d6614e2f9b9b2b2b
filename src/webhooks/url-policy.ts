import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import ipaddr from 'ipaddr.js'

/**
 * Where a webhook may be sent (docs/webhooks.md). The service calls URLs its callers name, so a URL
 * must not reach the service's own network: every address it resolves to must be public unicast,
 * unless WEBHOOK_ALLOW_PRIVATE_NETWORKS says otherwise. The check at creation gives a clear error;
 * the same test runs again at connect time (`guardedLookup`), after DNS, because a name can resolve
 * to a public address when checked and to 127.0.0.1 when connected to (DNS rebinding).
 */

export interface UrlPolicyOptions {
  allowPrivateNetworks: boolean
  /** Resolves names; node:dns `lookup` unless given (tests stand in for DNS with it). */
  lookup?: LookupFunction | undefined
  /** Times and bounds the lookups; the process's POLICY_LOOKUPS unless given (tests give their own). */
  lookups?: BoundedLookups | undefined
}

/**
 * `privateNetworksAllow`: WEBHOOK_ALLOW_PRIVATE_NETWORKS=true would accept the URL (it is http, or
 * an address is private or reserved), so the caller can say which setting does.
 */
export type UrlCheck = { ok: true; url: URL } | { ok: false; problem: string; privateNetworksAllow: boolean }

/** The error a refused address fails a connection with; the delivery reports it as "address not allowed". */
export const ADDRESS_NOT_ALLOWED = 'EWEBHOOKADDRESS'

/** The error a lookup fails with when it did not answer within its time; the delivery reports it as "DNS timeout". */
export const LOOKUP_TIMED_OUT = 'EWEBHOOKLOOKUPTIMEOUT'

/**
 * How long a lookup of the policy may take, its wait for a slot included. getaddrinfo has no
 * deadline of its own: a resolver that does not answer holds it for every attempt resolv.conf
 * allows against every server (5 s each by default), while a creation waits for its answer and a
 * delivery for its connection. 5 s is one attempt of a default resolver: a name that a healthy
 * resolver knows has answered by then.
 */
export const LOOKUP_TIMEOUT_MS = 5000

/**
 * How many lookups of the policy are in flight at once. getaddrinfo blocks a thread of libuv's
 * pool (4 unless UV_THREADPOOL_SIZE says otherwise), which file I/O and the list's compression
 * share: at 2, URLs whose names hang leave half of it free. A lookup that timed out keeps its slot
 * until getaddrinfo returns, as its thread is busy until then.
 */
export const LOOKUPS_IN_FLIGHT = 2

// NAT64 (RFC 6052): an IPv6-only network reaches IPv4 hosts through these, so the IPv4 address
// embedded in the low 32 bits is what is reached, and what is judged.
const NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b::/96')

// Global unicast (RFC 4291 2.4), the only IPv6 block assigned for public addresses. Outside it all
// is refused, whatever ipaddr.js calls it (often `unicast`): ::/8, reserved, with the
// IPv4-compatible ::/96 (deprecated by RFC 4291 2.5.5.1; the URL parser writes [::127.0.0.1] as
// [::7f00:1]), and every block not assigned, besides the ranges ipaddr.js names.
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3')

/**
 * True when a connection to `address` (an IP literal) is not allowed with private networks
 * refused. Only global unicast passes: loopback, private, link-local, unique-local, unspecified,
 * multicast, broadcast, carrier-grade NAT, reserved and documentation ranges, IPv6 outside
 * 2000::/3 (::/8 and its IPv4-compatible ::/96 among it), 6to4 and Teredo all fail; IPv4-mapped
 * IPv6 (::ffff:127.0.0.1) is judged as the IPv4 address it maps, NAT64 as the one it embeds.
 */
export function isForbiddenAddress(address: string): boolean {
  const ip = parseAddress(address)
  if (ip === undefined) return true
  if (ip.kind() === 'ipv4') return ip.range() !== 'unicast'
  const ipv6 = ip as ipaddr.IPv6
  if (ipv6.isIPv4MappedAddress()) return ipv6.toIPv4Address().range() !== 'unicast'
  if (ipv6.match(NAT64)) return ipaddr.fromByteArray(ipv6.toByteArray().slice(12)).range() !== 'unicast'
  return !ipv6.match(GLOBAL_UNICAST) || ipv6.range() !== 'unicast'
}

/**
 * `address` read by ipaddr.js, or undefined when it is not an IP address as Node writes one. IPv6
 * is first written anew by the WHATWG URL parser: Node (inet_ntop) writes an IPv4-compatible
 * address as ::a.b.c.d, which ipaddr.js reads as the IPv4-mapped ::ffff:a.b.c.d (so ::8.8.8.8
 * would pass as 8.8.8.8); the URL parser writes it in hex, ::808:808.
 */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const family = isIP(address)
  if (family === 4) return ipaddr.IPv4.parse(address)
  if (family !== 6) return undefined
  // A zone (fe80::1%eth0) names an interface, not an address, and a URL cannot carry one.
  const bare = address.replace(/%.*$/, '')
  try {
    return ipaddr.IPv6.parse(hostOf(new URL(`http://[${bare}]/`)))
  } catch {
    return undefined
  }
}

/**
 * The part of `checkWebhookUrl` that needs no DNS: scheme, credentials, host, and an IP literal's
 * address. A delivery runs it before connecting, since Node skips `lookup` for an IP literal.
 */
export function checkWebhookUrlForm(raw: string, allowPrivateNetworks: boolean): UrlCheck {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return refused('is not an absolute URL')
  }
  const schemes = allowPrivateNetworks ? ['https:', 'http:'] : ['https:']
  if (!schemes.includes(url.protocol)) {
    return allowPrivateNetworks ? refused('must use https or http') : refused('must use https', url.protocol === 'http:')
  }
  if (url.username !== '' || url.password !== '') return refused('must not contain a user name or password')
  const host = hostOf(url)
  if (host === '') return refused('must name a host')
  if (!allowPrivateNetworks && isIP(host) !== 0 && isForbiddenAddress(host)) {
    return refused('must not point to a private or reserved address', true)
  }
  return { ok: true, url }
}

/**
 * Whether `raw` may be a webhook URL: https (http too when private networks are allowed, for
 * receivers on a private network or this host), no user name or password, and a host every
 * address of which passes `isForbiddenAddress` (unless allowed). `problem` is a short sentence for
 * the caller; it names no address, so the check does not map the service's network for anyone.
 */
export async function checkWebhookUrl(raw: string, options: UrlPolicyOptions): Promise<UrlCheck> {
  const form = checkWebhookUrlForm(raw, options.allowPrivateNetworks)
  if (!form.ok || options.allowPrivateNetworks) return form
  const host = hostOf(form.url)
  if (isIP(host) !== 0) return form
  const lookups = options.lookups ?? POLICY_LOOKUPS
  // The delivery's own lookup, asked for every address: what passes it is what a delivery connects to.
  const lookup = guardedLookup(options)
  const code = await new Promise<string | undefined>((resolve) => lookup(host, { all: true }, (error) => resolve(error ? (error.code ?? '') : undefined)))
  if (code === ADDRESS_NOT_ALLOWED) return refused('has a host name that resolves to a private or reserved address', true)
  if (code === LOOKUP_TIMED_OUT) return refused(`has a host name that did not resolve within ${seconds(lookups.timeoutMs)}`)
  return code === undefined ? form : refused('has a host name that does not resolve')
}

/**
 * A `lookup` for http.request / net.connect that fails with ADDRESS_NOT_ALLOWED when any address
 * the name resolves to is forbidden, so what is connected to is what was judged. Connecting to an
 * IP literal skips `lookup` in Node: the delivery judges literals itself (`isForbiddenAddress`).
 * Lookups are timed and bounded as the check's are: one that does not answer in time fails with
 * LOOKUP_TIMED_OUT.
 */
export function guardedLookup(options: UrlPolicyOptions): LookupFunction {
  const lookup = options.lookup ?? (dnsLookup as LookupFunction)
  const lookups = options.lookups ?? POLICY_LOOKUPS
  return (hostname, lookupOptions, callback) => {
    lookups.lookup(lookup, hostname, { ...lookupOptions, all: true }, (error, result) => {
      if (error) return callback(error, '')
      const addresses = normalize(result)
      if (!options.allowPrivateNetworks && addresses.some((entry) => isForbiddenAddress(entry.address))) {
        const refused: NodeJS.ErrnoException = new Error('address not allowed')
        refused.code = ADDRESS_NOT_ALLOWED
        return callback(refused, '')
      }
      if (addresses.length === 0) {
        const none: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`)
        none.code = 'ENOTFOUND'
        return callback(none, '')
      }
      if (lookupOptions.all === true) return callback(null, addresses)
      const first = addresses[0] as LookupAddress
      callback(null, first.address, first.family)
    })
  }
}

type LookupCallback = Parameters<LookupFunction>[2]

/**
 * Lookups with a deadline and a bound on how many are in flight. A lookup beyond the bound waits
 * for a slot, in the order asked; one with no answer `timeoutMs` after it was asked, waiting
 * included, fails with LOOKUP_TIMED_OUT. Its slot is freed only when the lookup itself answers,
 * however late: a timed-out getaddrinfo still holds its thread.
 */
export class BoundedLookups {
  private inFlight = 0
  private readonly waiting: (() => void)[] = []

  constructor(
    readonly limit: number,
    readonly timeoutMs: number,
  ) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`BoundedLookups: limit must be a positive integer, got ${limit}`)
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`BoundedLookups: timeoutMs must be positive, got ${timeoutMs}`)
  }

  /** Lookups started and not yet answered, timed out or not. */
  get running(): number {
    return this.inFlight
  }

  /** `lookup(hostname, options, callback)` once a slot is free; `callback` is called once. */
  lookup(lookup: LookupFunction, hostname: string, options: LookupOptions, callback: LookupCallback): void {
    let answered = false
    const answer: LookupCallback = (error, result, family) => {
      if (answered) return
      answered = true
      clearTimeout(timer)
      callback(error, result, family)
    }
    const start = (): void => {
      this.inFlight++
      let released = false
      const release = (): void => {
        if (released) return
        released = true
        this.inFlight--
        this.startWaiting()
      }
      try {
        lookup(hostname, options, (error, result, family) => {
          release()
          answer(error, result, family)
        })
      } catch (error) {
        release()
        answer(error as NodeJS.ErrnoException, '')
      }
    }
    const timer = setTimeout(() => {
      const queued = this.waiting.indexOf(start)
      if (queued !== -1) this.waiting.splice(queued, 1)
      const timedOut: NodeJS.ErrnoException = new Error(`lookup of ${hostname} timed out after ${seconds(this.timeoutMs)}`)
      timedOut.code = LOOKUP_TIMED_OUT
      answer(timedOut, '')
    }, this.timeoutMs)
    if (this.inFlight < this.limit) start()
    else this.waiting.push(start)
  }

  private startWaiting(): void {
    while (this.inFlight < this.limit && this.waiting.length > 0) this.waiting.shift()!()
  }
}

/** Every lookup the policy makes in this process: the thread pool they share is the process's. */
export const POLICY_LOOKUPS = new BoundedLookups(LOOKUPS_IN_FLIGHT, LOOKUP_TIMEOUT_MS)

/** The URL's host as an address or name: IPv6 literals without their brackets. */
export function hostOf(url: URL): string {
  const host = url.hostname
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}

function refused(problem: string, privateNetworksAllow = false): UrlCheck {
  return { ok: false, problem, privateNetworksAllow }
}

function seconds(ms: number): string {
  return `${ms / 1000} s`
}

// A stand-in lookup may answer with one address even when asked for all of them.
function normalize(result: string | LookupAddress[]): LookupAddress[] {
  return Array.isArray(result) ? result : [{ address: result, family: isIP(result) || 4 }]
}
