import type { LookupAddress } from 'node:dns'
import { Resolver } from 'node:dns/promises'

/**
 * How webhook host names are resolved (docs/webhooks.md, "How host names are resolved"): by DNS
 * through Node's c-ares resolver, not getaddrinfo (`dns.lookup`). getaddrinfo holds one of libuv's
 * four threads until the system resolver gives up (10–30 s against one that drops the query) and
 * cannot be cancelled, so any bound on lookups in flight could be taken by names that never answer.
 * A c-ares query holds no thread, only a socket, and is cancelled at its deadline: a name that never
 * answers costs its own lookup five seconds and nothing else. c-ares reads resolv.conf's servers
 * but neither /etc/hosts nor its search domains, so a name must be one DNS resolves in full.
 */

/**
 * How long a lookup may take, at creation, at PATCH and when a delivery connects. 5 s is one
 * attempt of a default system resolver: a name a healthy resolver knows has answered by then.
 */
export const LOOKUP_TIMEOUT_MS = 5000

/** The error a lookup fails with when it did not answer within LOOKUP_TIMEOUT_MS; a delivery reports it as "DNS timeout". */
export const LOOKUP_TIMED_OUT = 'EWEBHOOKLOOKUPTIMEOUT'

// c-ares sends a query again when about a second passes without an answer, then waits longer each
// time; with four sends per server it is still trying at the deadline, which then decides.
const RESEND_AFTER_MS = 1000
const SENDS_PER_SERVER = 4

// RFC 6761 6.3: localhost names are the loopback addresses, never asked of DNS.
const LOOPBACK: readonly LookupAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
]

/**
 * The addresses of `hostname` (a name, not an IP literal): its A and AAAA records, asked at once of
 * `servers` (`IP` or `IP:port`, as dns.setServers takes them; resolv.conf's when none are given),
 * IPv4 first. Each lookup has a resolver of its own, so the deadline cancels that lookup alone. The
 * addresses of whichever family answered by the deadline are used; fails with ENOTFOUND when the
 * name has none (no such name, or no A or AAAA record), LOOKUP_TIMED_OUT when neither query was
 * answered in time, EAI_AGAIN when the resolver failed otherwise (refused, SERVFAIL, unreachable).
 */
export async function resolveHost(hostname: string, servers?: readonly string[]): Promise<LookupAddress[]> {
  const name = hostname.toLowerCase().replace(/\.$/, '')
  if (name === 'localhost' || name.endsWith('.localhost')) return [...LOOPBACK]
  const resolver = new Resolver({ timeout: RESEND_AFTER_MS, tries: SENDS_PER_SERVER })
  if (servers !== undefined && servers.length > 0) resolver.setServers(servers)
  const deadline = setTimeout(() => resolver.cancel(), LOOKUP_TIMEOUT_MS)
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)]).finally(() => clearTimeout(deadline))
  // IPv4 first: a connection tries the first address's family first and the other 250 ms later
  // (autoSelectFamily), so a host without an IPv6 route loses no time.
  const addresses = [...answered(v4, 4), ...answered(v6, 6)]
  if (addresses.length > 0) return addresses
  // An answer without addresses is NODATA too.
  throw lookupError(hostname, [v4, v6].map((result) => (result.status === 'rejected' ? ((result.reason as NodeJS.ErrnoException).code ?? '') : 'ENODATA')))
}

function answered(result: PromiseSettledResult<string[]>, family: 4 | 6): LookupAddress[] {
  return result.status === 'fulfilled' ? result.value.map((address) => ({ address, family })) : []
}

/** The error of a lookup that found no address, from the codes of its two queries (node:dns's). */
function lookupError(hostname: string, codes: string[]): NodeJS.ErrnoException {
  // NXDOMAIN for either family is no such name; NODATA for both, a name without addresses.
  const code =
    codes.includes('ENOTFOUND') || codes.every((each) => each === 'ENODATA')
      ? 'ENOTFOUND'
      : codes.some((each) => each === 'ECANCELLED' || each === 'ETIMEOUT')
        ? LOOKUP_TIMED_OUT
        : 'EAI_AGAIN'
  const error: NodeJS.ErrnoException = new Error(
    code === LOOKUP_TIMED_OUT ? `lookup of ${hostname} timed out after ${LOOKUP_TIMEOUT_MS / 1000} s` : `lookup of ${hostname} failed: ${codes.join(', ')}`,
  )
  error.code = code
  return error
}
