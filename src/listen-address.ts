import { createServer, isIP } from 'node:net'
import { ConfigError } from './config.js'

const HOST_FORM = 'expected an address of this machine: 0.0.0.0 for every interface, 127.0.0.1 for this machine only, or a name that resolves to one'

/**
 * Refuses a HOST and PORT the server could not listen on (a name that does not resolve, an address
 * of another machine, a port in use) before it opens its database, which it would otherwise create
 * and migrate first: found by listening there for a moment, as the server then does.
 */
export async function checkListenAddress(host: string, port: number): Promise<void> {
  // A name of digits and dots would be looked up as a name and not found: say what it is.
  if (/^[0-9.]+$/.test(host) && isIP(host) === 0) throw new ConfigError('HOST', `${JSON.stringify(host)} is not an IPv4 address; ${HOST_FORM}`)
  const probe = createServer()
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject)
      probe.listen({ host, port }, resolve)
    })
  } catch (error) {
    throw listenError(error, host, port)
  } finally {
    await new Promise((resolve) => probe.close(resolve))
  }
}

/**
 * What a failure to resolve or listen on HOST:PORT says to the user: a ConfigError naming the
 * setting, what is wrong and what is expected; any other error as it is.
 */
export function listenError(error: unknown, host: string, port: number): unknown {
  const shown = JSON.stringify(host)
  switch ((error as NodeJS.ErrnoException).code) {
    case 'ENOTFOUND':
    case 'EAI_NONAME':
    case 'EAI_NODATA':
      return new ConfigError('HOST', `${shown} does not resolve to an address; ${HOST_FORM}`)
    case 'EAI_AGAIN':
      return new ConfigError('HOST', `${shown} could not be resolved now (no answer from the name server); ${HOST_FORM}`)
    case 'EADDRNOTAVAIL':
      return new ConfigError('HOST', `${shown} is not an address of this machine; ${HOST_FORM}`)
    case 'EADDRINUSE':
      return new ConfigError('PORT', `${port} is already in use on ${host} by another process; choose another, or stop that one`)
    case 'EACCES':
      return new ConfigError('PORT', `${port} may not be listened on by this user (ports below 1024 need privileges); choose one from 1024 to 65535`)
    default:
      return error
  }
}
