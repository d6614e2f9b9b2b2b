import type { LookupAddress } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import ipaddr from 'ipaddr.js'
import { LOOKUP_TIMED_OUT, LOOKUP_TIMEOUT_MS, resolveHost } from './resolve-host.js'

/**
 * Where a webhook may be sent (docs/webhooks.md). The service calls URLs its callers name, so a URL
 * must not reach the service's own network: every address it resolves to must be public unicast,
 * unless WEBHOOK_ALLOW_PRIVATE_NETWORKS says otherwise. The check at creation gives a clear error;
 * the same test runs again at connect time (`guardedLookup`), after DNS, because a name can resolve
 * to a public address when checked and to 127.0.0.1 when connected to (DNS rebinding).
 */

export interface UrlPolicyOptions {
  allowPrivateNetworks: boolean
  /** The DNS servers host names are resolved with (WEBHOOK_DNS_SERVERS); the system's when none. */
  dnsServers?: readonly string[] | undefined
}

/**
 * `privateNetworksAllow`: WEBHOOK_ALLOW_PRIVATE_NETWORKS=true would accept the URL (it is http, an
 * address is private or reserved, or a name has no public address), so the caller can say which
 * setting does.
 */
export type UrlCheck = { ok: true; url: URL } | { ok: false; problem: string; privateNetworksAllow: boolean }

/** The error a refused address fails a connection with; the delivery reports it as "address not allowed". */
export const ADDRESS_NOT_ALLOWED = 'EWEBHOOKADDRESS'

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
 * The part of `checkWebhookUrl` that needs no DNS: the characters, scheme, credentials, host, and
 * an IP literal's address. A delivery runs it before connecting, since Node skips `lookup` for an
 * IP literal.
 */
export function checkWebhookUrlForm(raw: string, allowPrivateNetworks: boolean): UrlCheck {
  // The URL parser drops tabs and newlines and trims what surrounds the URL: the URL stored and
  // shown would not be the one called. Format characters (zero-width, bidi) hide what is called.
  if (/[\p{Cc}\p{Cf}\s]/u.test(raw)) return refused('must not contain whitespace or control characters')
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
  // The URL parser takes port 0, which no connection can reach (it reads 1–65535 as given).
  if (url.port === '0') return refused('must not use port 0')
  if (!allowPrivateNetworks && isIP(host) !== 0 && isForbiddenAddress(host)) {
    return refused('must not point to a private or reserved address', true)
  }
  return { ok: true, url }
}

/**
 * Whether `raw` may be a webhook URL: https (http too when private networks are allowed, for
 * receivers on a private network or this host), no user name or password, no whitespace or control
 * characters, and a host every address of which passes `isForbiddenAddress` (unless allowed).
 * `problem` is a short sentence for the caller. It names no address, and a name with a private
 * address is told what a name with none is: otherwise the check would tell anyone which names exist
 * inside the service's network. A lookup that timed out keeps its own words: it says the resolver,
 * not the name, is at fault, and to try again.
 */
export async function checkWebhookUrl(raw: string, options: UrlPolicyOptions): Promise<UrlCheck> {
  const form = checkWebhookUrlForm(raw, options.allowPrivateNetworks)
  if (!form.ok || options.allowPrivateNetworks) return form
  const host = hostOf(form.url)
  if (isIP(host) !== 0) return form
  // The delivery's own lookup: what passes it is what a delivery connects to.
  const code = await allowedAddresses(host, options).then(
    () => undefined,
    (error: NodeJS.ErrnoException) => error.code,
  )
  if (code === undefined) return form
  if (code === LOOKUP_TIMED_OUT) return refused(`has a host name that did not resolve within ${LOOKUP_TIMEOUT_MS / 1000} s`)
  return refused('has a host name that does not resolve to a public address', true)
}

/**
 * A `lookup` for http.request / net.connect that fails with ADDRESS_NOT_ALLOWED when any address
 * the name resolves to is forbidden, so what is connected to is what was judged. Connecting to an
 * IP literal skips `lookup` in Node: the delivery judges literals itself (`isForbiddenAddress`).
 * Names are resolved by `resolveHost`: one that does not answer in time fails with LOOKUP_TIMED_OUT.
 */
export function guardedLookup(options: UrlPolicyOptions): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    void allowedAddresses(hostname, options).then(
      (addresses) => {
        if (lookupOptions.all === true) return callback(null, addresses)
        const first = addresses[0]!
        callback(null, first.address, first.family)
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    )
  }
}

/** The addresses of `hostname`, or ADDRESS_NOT_ALLOWED when any of them is forbidden (private networks refused). */
async function allowedAddresses(hostname: string, options: UrlPolicyOptions): Promise<LookupAddress[]> {
  const addresses = await resolveHost(hostname, options.dnsServers)
  if (!options.allowPrivateNetworks && addresses.some((entry) => isForbiddenAddress(entry.address))) {
    const error: NodeJS.ErrnoException = new Error('address not allowed')
    error.code = ADDRESS_NOT_ALLOWED
    throw error
  }
  return addresses
}

/** The URL's host as an address or name: IPv6 literals without their brackets. */
function hostOf(url: URL): string {
  const host = url.hostname
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}

function refused(problem: string, privateNetworksAllow = false): UrlCheck {
  return { ok: false, problem, privateNetworksAllow }
}
