import { isIPv6 } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { loadConfig } from '../../config.js'
import { CommandError, PROGRAM, stringOption, UsageError, type Command } from '../command.js'

/** Under the container image's HEALTHCHECK --timeout (5 s), so a slow answer is this command's failure, not a kill. */
const TIMEOUT_MS = 3000

export const healthcheck: Command = {
  name: ['healthcheck'],
  synopsis: 'healthcheck [--ready] [--wait SECONDS]',
  summary: "ask the server on this machine whether it is up (a container's health check)",
  options: { ready: { type: 'boolean' }, wait: { type: 'string' } },
  help: `Usage: ${PROGRAM} healthcheck [--ready] [--wait SECONDS]

Asks the server that 'serve' runs with the same environment (HOST, PORT) whether it is up:
GET /healthz, or with --ready GET /readyz (the database answers too). Exits 0 on a 200; otherwise
prints why on stderr and exits 1, within ${TIMEOUT_MS / 1000} seconds. A HOST of 0.0.0.0 or :: (every interface)
is asked on the loopback address. It is what the container image's HEALTHCHECK runs: no curl
or wget is needed in the image.

Options:
  --ready            ask /readyz, which also checks the database (readiness), instead of /healthz
  --wait SECONDS     ask again, four times a second, until the answer is 200 or SECONDS (1 to 600)
                     have passed: for a script that has just started the server
  -h, --help         show this help

Examples:
  ${PROGRAM} healthcheck
  PORT=3000 ${PROGRAM} healthcheck --ready
  docker exec CONTAINER ${PROGRAM} healthcheck --ready --wait 30`,
  async run({ values }, io) {
    const waitText = stringOption(values, 'wait')
    if (waitText !== undefined && !(/^[0-9]{1,3}$/.test(waitText) && Number(waitText) >= 1 && Number(waitText) <= 600)) {
      throw new UsageError(`--wait must be a whole number of seconds from 1 to 600, got ${JSON.stringify(waitText)}`)
    }
    const { host, port } = loadConfig(io.env)
    if (port === 0) throw new CommandError('PORT is 0 (any free port): the port the server chose cannot be known here; set PORT')
    const url = `http://${hostForUrl(host)}:${port}${values.ready === true ? '/readyz' : '/healthz'}`
    const deadline = Date.now() + Number(waitText ?? 0) * 1000
    for (;;) {
      const problem = await ask(url)
      if (problem === undefined) break
      if (Date.now() >= deadline) throw new CommandError(waitText === undefined ? problem : `${problem} (still, after ${waitText} s)`)
      await sleep(250)
    }
    io.stdout.write(`${url}: ok\n`)
  },
}

/** What is wrong with `url`'s answer, or undefined for a 200. */
async function ask(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) })
    await response.body?.cancel()
    return response.status === 200 ? undefined : `${url} answered ${response.status}`
  } catch (error) {
    const cause = (error as Error & { cause?: { code?: string } }).cause?.code
    return `${url}: ${(error as Error).name === 'TimeoutError' ? `no answer within ${TIMEOUT_MS / 1000} s` : (cause ?? (error as Error).message)}`
  }
}

/** The address to ask: the wildcard addresses mean every interface, of which loopback is one. */
function hostForUrl(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1'
  if (host === '::' || host === '[::]') return '[::1]'
  return isIPv6(host) ? `[${host}]` : host
}
