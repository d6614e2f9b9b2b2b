import { isIPv6 } from 'node:net'
import { loadConfig } from '../../config.js'
import { CommandError, PROGRAM, type Command } from '../command.js'

/** Under the container image's HEALTHCHECK --timeout (5 s), so a slow answer is this command's failure, not a kill. */
const TIMEOUT_MS = 3000

export const healthcheck: Command = {
  name: ['healthcheck'],
  synopsis: 'healthcheck [--ready]',
  summary: "ask the server on this machine whether it is up (a container's health check)",
  options: { ready: { type: 'boolean' } },
  help: `Usage: ${PROGRAM} healthcheck [--ready]

Asks the server that 'serve' runs with the same environment (HOST, PORT) whether it is up:
GET /healthz, or with --ready GET /readyz (the database answers too). Exits 0 on a 200; otherwise
prints why on stderr and exits 1, within ${TIMEOUT_MS / 1000} seconds. A HOST of 0.0.0.0 or :: (every interface)
is asked on the loopback address. It is what the container image's HEALTHCHECK runs: no curl
or wget is needed in the image.

Options:
  --ready      ask /readyz, which also checks the database (readiness), instead of /healthz
  -h, --help   show this help

Examples:
  ${PROGRAM} healthcheck
  PORT=3000 ${PROGRAM} healthcheck --ready
  docker inspect --format '{{.State.Health.Status}}' CONTAINER`,
  async run({ values }, io) {
    const { host, port } = loadConfig(io.env)
    if (port === 0) throw new CommandError('PORT is 0 (any free port): the port the server chose cannot be known here; set PORT')
    const url = `http://${hostForUrl(host)}:${port}${values.ready === true ? '/readyz' : '/healthz'}`
    let status: number
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) })
      status = response.status
      await response.body?.cancel()
    } catch (error) {
      const cause = (error as Error & { cause?: { code?: string } }).cause?.code
      const why = (error as Error).name === 'TimeoutError' ? `no answer within ${TIMEOUT_MS / 1000} s` : (cause ?? (error as Error).message)
      throw new CommandError(`${url}: ${why}`)
    }
    if (status !== 200) throw new CommandError(`${url} answered ${status}`)
    io.stdout.write(`${url}: ok\n`)
  },
}

/** The address to ask: the wildcard addresses mean every interface, of which loopback is one. */
function hostForUrl(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1'
  if (host === '::' || host === '[::]') return '[::1]'
  return isIPv6(host) ? `[${host}]` : host
}
