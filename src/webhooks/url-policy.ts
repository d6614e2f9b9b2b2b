import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
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
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; problem: string }

/** The error a refused address fails a connection with; the delivery reports it as "address not allowed". */
export const ADDRESS_NOT_ALLOWED = 'EWEBHOOKADDRESS'

// NAT64 (RFC 6052): an IPv6-only network reaches IPv4 hosts through these, so the IPv4 address
// embedded in the low 32 bits is what is reached, and what is judged.
const NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b::/96')

/**
 * True when a connection to `address` (an IP literal) is not allowed with private networks
 * refused. Only global unicast passes: loopback, private, link-local, unique-local, unspecified,
 * multicast, broadcast, carrier-grade NAT, reserved and documentation ranges, 6to4 and Teredo all
 * fail, and IPv4-mapped IPv6 (::ffff:127.0.0.1) is judged as the IPv4 address it maps.
 */
export function isForbiddenAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return true
  // process() turns ::ffff:a.b.c.d into a.b.c.d.
  const ip = ipaddr.process(address)
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).match(NAT64)) {
    const bytes = ip.toByteArray().slice(12)
    return ipaddr.fromByteArray(bytes).range() !== 'unicast'
  }
  return ip.range() !== 'unicast'
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
    return { ok: false, problem: 'is not an absolute URL' }
  }
  const schemes = allowPrivateNetworks ? ['https:', 'http:'] : ['https:']
  if (!schemes.includes(url.protocol)) return { ok: false, problem: allowPrivateNetworks ? 'must use https or http' : 'must use https' }
  if (url.username !== '' || url.password !== '') return { ok: false, problem: 'must not contain a user name or password' }
  const host = hostOf(url)
  if (host === '') return { ok: false, problem: 'must name a host' }
  if (!allowPrivateNetworks && isIP(host) !== 0 && isForbiddenAddress(host)) {
    return { ok: false, problem: 'must not point to a private or reserved address' }
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
  const url = form.url
  let addresses: LookupAddress[]
  try {
    addresses = await lookupAll(options.lookup ?? (dnsLookup as LookupFunction), host)
  } catch {
    return { ok: false, problem: 'has a host name that does not resolve' }
  }
  if (addresses.length === 0) return { ok: false, problem: 'has a host name that does not resolve' }
  if (addresses.some((entry) => isForbiddenAddress(entry.address))) {
    return { ok: false, problem: 'has a host name that resolves to a private or reserved address' }
  }
  return { ok: true, url }
}

/**
 * A `lookup` for http.request / net.connect that fails with ADDRESS_NOT_ALLOWED when any address
 * the name resolves to is forbidden, so what is connected to is what was judged. Connecting to an
 * IP literal skips `lookup` in Node: the delivery judges literals itself (`isForbiddenAddress`).
 */
export function guardedLookup(options: UrlPolicyOptions): LookupFunction {
  const lookup = options.lookup ?? (dnsLookup as LookupFunction)
  return (hostname, lookupOptions, callback) => {
    lookup(hostname, { ...lookupOptions, all: true }, (error, result) => {
      if (error) return callback(error, '')
      const addresses = normalize(result, undefined)
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

/** The URL's host as an address or name: IPv6 literals without their brackets. */
export function hostOf(url: URL): string {
  const host = url.hostname
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}

function lookupAll(lookup: LookupFunction, host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    lookup(host, { all: true }, (error, result, family) => {
      if (error) reject(error)
      else resolve(normalize(result, family))
    })
  })
}

// A stand-in lookup may answer with one address even when asked for all of them.
function normalize(result: string | LookupAddress[], family: number | undefined): LookupAddress[] {
  if (Array.isArray(result)) return result
  return [{ address: result, family: family ?? (isIP(result) || 4) }]
}
