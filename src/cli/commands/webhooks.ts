import { stringify as stringifyLossless } from 'lossless-json'
import { loadWebhooksConfig } from '../../config.js'
import { parseInt64 } from '../../domain/int64.js'
import { ORDER_EVENT_TYPES, type OrderEventType } from '../../domain/order-events.js'
import { ATTEMPTS_KEPT, type WebhookEndpoint } from '../../domain/webhooks.js'
import { ApiError } from '../../errors.js'
import { ATTEMPTS_LISTED_DEFAULT, MAX_WEBHOOK_DESCRIPTION_LENGTH, MAX_WEBHOOK_URL_LENGTH } from '../../schemas/webhook-endpoint.js'
import { Deliverer } from '../../webhooks/delivery.js'
import { createWebhookEndpoint, rotateWebhookSecret, toApiWebhookAttempt, toApiWebhookEndpoint, toEndpointPatch } from '../../webhooks/endpoints.js'
import { pingWebhookEndpoint, toApiPingResult } from '../../webhooks/ping.js'
import { CommandError, lowerFirst, PROGRAM, printable, printRows, stringOption, UsageError, withStore, type Command } from '../command.js'
import { afterOption, cursorProblem } from './events.js'

const POLICY = `The URL must be https, with no user name or password, whitespace or control characters, and
its host must resolve only to public addresses — unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true, which
also allows http and private, loopback and link-local addresses (tests, on-premises receivers).
Host names are asked of DNS (WEBHOOK_DNS_SERVERS, or those of /etc/resolv.conf), not /etc/hosts.
At most WEBHOOK_MAX_ENDPOINTS (default 100) endpoints exist.`

/** `--events a,b`: known types, each once; stored in feed-type order. */
function parseEvents(text: string): OrderEventType[] {
  const types = text.split(',').map((type) => type.trim())
  for (const type of types) {
    if (!(ORDER_EVENT_TYPES as readonly string[]).includes(type)) {
      throw new UsageError(`--events: unknown event type ${JSON.stringify(type)} (types: ${ORDER_EVENT_TYPES.join(', ')})`)
    }
  }
  if (new Set(types).size !== types.length) throw new UsageError('--events names a type more than once')
  return types as OrderEventType[]
}

/** The ID positional of the commands on one endpoint. */
const ENDPOINT_ID = { name: 'ID', describe: "the endpoint's id, as 'webhooks list' shows it" }

function endpointId(text: string): bigint {
  const id = /^[0-9]{1,19}$/.test(text) ? parseInt64(text) : undefined
  if (id === undefined) throw new UsageError(`ID must be an endpoint id, as 'webhooks list' shows it; got ${JSON.stringify(text)}`)
  return id
}

/** An API refusal (URL policy, limit) as the one-line error of a command. */
function asCommandError(error: unknown): unknown {
  return error instanceof ApiError ? new CommandError(lowerFirst(error.message)) : error
}

function noSuchEndpoint(id: bigint): CommandError {
  return new CommandError(`no webhook endpoint has the id ${id}`)
}

export const webhooksAdd: Command = {
  name: ['webhooks', 'add'],
  synopsis: 'webhooks add URL',
  summary: 'create a webhook endpoint and print its signing secret (shown only this once)',
  options: { events: { type: 'string' }, description: { type: 'string' }, json: { type: 'boolean' } },
  positionals: [{ name: 'URL', describe: 'where events are POSTed, e.g. https://hooks.example.com/petstore' }],
  help: `Usage: ${PROGRAM} webhooks add URL [--events TYPES] [--description TEXT] [--json]

Creates a webhook endpoint: every order event of its types committed from now on is POSTed to
URL, in feed order, signed (docs/webhooks.md). Prints the endpoint's signing secret, alone on
one line, on stdout, and the endpoint's id on stderr. The secret is shown only this once; a
running server starts delivering within a few seconds.

${POLICY}

Options:
  --events TYPES        comma-separated, from ${ORDER_EVENT_TYPES.join(', ')}
                        (default: every type)
  --description TEXT    what the endpoint is for, up to ${MAX_WEBHOOK_DESCRIPTION_LENGTH} characters
  --json                print the endpoint with its secret as one JSON object instead
  -h, --help            show this help

Examples:
  ${PROGRAM} webhooks add https://hooks.example.com/petstore
  SECRET=$(${PROGRAM} webhooks add https://hooks.example.com/dispatch --events order.shipped,order.cancelled)`,
  async run({ values, positionals }, io) {
    const url = positionals[0]!
    if (url.length > MAX_WEBHOOK_URL_LENGTH) throw new UsageError(`URL must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`)
    const eventsText = stringOption(values, 'events')
    const eventTypes = eventsText === undefined ? undefined : parseEvents(eventsText)
    const description = stringOption(values, 'description')
    if (description !== undefined && description.length > MAX_WEBHOOK_DESCRIPTION_LENGTH) {
      throw new UsageError(`--description must be at most ${MAX_WEBHOOK_DESCRIPTION_LENGTH} characters`)
    }
    const config = loadWebhooksConfig(io.env)
    const { endpoint, secret } = await withStore(io, (store) =>
      createWebhookEndpoint(store.webhooks, config, { url, eventTypes, description }).catch((error: unknown) => {
        throw asCommandError(error)
      }),
    )
    if (values.json === true) {
      io.stdout.write(`${stringifyLossless({ ...toApiWebhookEndpoint(endpoint), secret })}\n`)
      return
    }
    io.stdout.write(`${secret}\n`)
    io.stderr.write(
      `created webhook endpoint ${endpoint.id} for ${printable(endpoint.url)}, events ${endpoint.eventTypes.join(',')}, ` +
        `from position ${endpoint.position}; store the secret now: it cannot be shown again\n`,
    )
  },
}

const COLUMNS = ['ID', 'STATUS', 'URL', 'EVENTS', 'POSITION', 'NEXT ATTEMPT', 'CREATED'] as const

function endpointColumns(endpoint: WebhookEndpoint): string[] {
  const status = endpoint.enabled ? 'enabled' : `disabled:${endpoint.disabledReason ?? 'unknown'}`
  const events = endpoint.eventTypes.length === ORDER_EVENT_TYPES.length ? 'all' : endpoint.eventTypes.join(',')
  return [String(endpoint.id), status, printable(endpoint.url), events, String(endpoint.position), endpoint.nextAttemptAt ?? '-', endpoint.createdAt]
}

export const webhooksList: Command = {
  name: ['webhooks', 'list'],
  synopsis: 'webhooks list',
  summary: 'list webhook endpoints (never their secrets)',
  options: { json: { type: 'boolean' } },
  help: `Usage: ${PROGRAM} webhooks list [--json]

Lists every webhook endpoint, oldest first, one a line: id, status (enabled, or disabled:REASON),
URL, event types ("all" for every type), position in the event feed, when a failing event is
tried again ("-" when none is) and when it was created. Secrets are never shown. On a terminal
the columns are aligned under a header; piped, they are separated by tabs with no header.

Options:
  --json       print a JSON array of endpoints as the API shows them (GET /v2/webhook-endpoints)
  -h, --help   show this help

Examples:
  ${PROGRAM} webhooks list
  ${PROGRAM} webhooks list | awk -F'\\t' '$2 != "enabled" { print $1, $2 }'   # disabled endpoints
  ${PROGRAM} webhooks list --json`,
  async run({ values }, io) {
    const endpoints = await withStore(io, (store) => store.webhooks.list())
    if (values.json === true) {
      // As the API shows them (never a secret), ids exact.
      io.stdout.write(`${stringifyLossless(endpoints.map(toApiWebhookEndpoint))}\n`)
      return
    }
    printRows(io, COLUMNS, endpoints.map(endpointColumns), `no webhook endpoints yet; create one with '${PROGRAM} webhooks add URL'`)
  },
}

export const webhooksRemove: Command = {
  name: ['webhooks', 'remove'],
  synopsis: 'webhooks remove ID',
  summary: 'delete a webhook endpoint and its attempts',
  positionals: [ENDPOINT_ID],
  help: `Usage: ${PROGRAM} webhooks remove ID

Deletes the webhook endpoint ID and its delivery attempts: nothing more is sent to it (a
delivery already in flight is its last). An unknown ID fails.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} webhooks remove 7`,
  async run({ positionals }, io) {
    const id = endpointId(positionals[0]!)
    const removed = await withStore(io, (store) => store.webhooks.remove(id))
    if (!removed) throw noSuchEndpoint(id)
    io.stdout.write(`removed webhook endpoint ${id}\n`)
  },
}

export const webhooksReplay: Command = {
  name: ['webhooks', 'replay'],
  synopsis: 'webhooks replay ID --after CURSOR',
  summary: 'send a webhook endpoint every event after a cursor again',
  options: { after: { type: 'string' } },
  positionals: [ENDPOINT_ID],
  help: `Usage: ${PROGRAM} webhooks replay ID --after CURSOR

Moves the webhook endpoint ID to the feed position CURSOR and enables it: it is sent every event
of its types after CURSOR again, in order, each with the webhook-id it had before. CURSOR is an
event's id or a feed cursor ('events tail' prints both); it may be before or after the
endpoint's position. A cursor older than the feed's retention, or past its end, fails.

Options:
  --after CURSOR   the position to resume after: a decimal event id (required)
  -h, --help       show this help

Examples:
  ${PROGRAM} webhooks replay 7 --after 1234`,
  async run({ values, positionals }, io) {
    const id = endpointId(positionals[0]!)
    const text = stringOption(values, 'after')
    if (text === undefined) throw new UsageError('missing --after (the feed cursor to replay after, e.g. --after 1234)')
    const after = afterOption(text)
    const endpoint = await withStore(io, (store) =>
      store.webhooks.replay(id, after).catch((error: unknown) => {
        throw cursorProblem(error, `--after ${after}`, 'replay from a later cursor')
      }),
    )
    if (endpoint === undefined) throw noSuchEndpoint(id)
    io.stdout.write(`webhook endpoint ${id} replays the events after ${after}\n`)
  },
}

export const webhooksPing: Command = {
  name: ['webhooks', 'ping'],
  synopsis: 'webhooks ping ID',
  summary: 'send a webhook endpoint a signed test delivery and print how it went',
  options: { json: { type: 'boolean' } },
  positionals: [ENDPOINT_ID],
  help: `Usage: ${PROGRAM} webhooks ping ID [--json]

Sends the webhook endpoint ID one delivery now, of type webhook.ping, outside the event feed,
signed with its secret (and the previous one, within 24 hours of a rotation) as every delivery
is, to its URL, whether it is enabled or not; then prints what the receiver answered and how
long it took. Its webhook-id is ping_ and 24 hex characters; its body is
{"type":"webhook.ping","timestamp":"…","data":{"endpointId":"ID"}}. The endpoint is left as it
was: its position, its status (a 410 disables nothing) and its attempts. The WEBHOOK_* variables
apply as they do to the server's deliveries (WEBHOOK_TIMEOUT_MS, WEBHOOK_ALLOW_PRIVATE_NETWORKS).

Exit status 0 once the ping was sent, whatever the receiver answered (read the line printed, or
--json); 1 when there is no such endpoint, or when a ping to it (from the API on any server, or
another run of this command) is still in flight: one ping per endpoint at a time.

Options:
  --json       print the result as the API answers it: {"status"?, "error"?, "durationMs"}
  -h, --help   show this help

Examples:
  ${PROGRAM} webhooks ping 7
  # webhook endpoint 7 answered 204 in 85 ms
  ${PROGRAM} webhooks ping 7 --json`,
  async run({ values, positionals }, io) {
    const id = endpointId(positionals[0]!)
    const config = loadWebhooksConfig(io.env)
    const deliverer = new Deliverer(config)
    let result
    try {
      result = await withStore(io, (store) =>
        pingWebhookEndpoint(store.webhooks, (request, signal) => deliverer.deliver(request, signal), id, { timeoutMs: config.timeoutMs }),
      )
    } catch (error) {
      throw asCommandError(error) // another ping in flight: one line, exit 1
    } finally {
      deliverer.close()
    }
    if (result === undefined) throw noSuchEndpoint(id)
    if (values.json === true) {
      io.stdout.write(`${JSON.stringify(toApiPingResult(result))}\n`)
      return
    }
    const answered = result.error === null ? `answered ${result.status}` : `did not answer with a 2xx: ${result.error}`
    io.stdout.write(`webhook endpoint ${id} ${answered} in ${result.durationMs} ms\n`)
  },
}

const ATTEMPT_COLUMNS = ['ATTEMPTED', 'EVENT', 'STATUS', 'ERROR', 'MS'] as const

export const webhooksAttempts: Command = {
  name: ['webhooks', 'attempts'],
  synopsis: 'webhooks attempts ID',
  summary: "show a webhook endpoint's latest delivery attempts",
  options: { limit: { type: 'string' }, json: { type: 'boolean' } },
  positionals: [ENDPOINT_ID],
  help: `Usage: ${PROGRAM} webhooks attempts ID [--limit N] [--json]

Shows the latest delivery attempts of the webhook endpoint ID, newest first, one a line: when,
the event's id (its webhook-id), the status of the response ("-" when none came), a short error
when it was not a 2xx ("-" when it was), and how long it took in milliseconds. The last
${ATTEMPTS_KEPT} are kept; never a response body. Pings are not attempts: they are not shown. On a
terminal the columns are aligned under a header; piped, they are separated by tabs with no header.

Options:
  --limit N    how many attempts at most, 1 to ${ATTEMPTS_KEPT} (default ${ATTEMPTS_LISTED_DEFAULT})
  --json       print a JSON array of attempts as the API shows them (GET …/attempts)
  -h, --help   show this help

Examples:
  ${PROGRAM} webhooks attempts 7
  ${PROGRAM} webhooks attempts 7 --limit 100 | awk -F'\\t' '$4 != "-"'   # the failures`,
  async run({ values, positionals }, io) {
    const id = endpointId(positionals[0]!)
    const limitText = stringOption(values, 'limit')
    const limit = limitText === undefined ? ATTEMPTS_LISTED_DEFAULT : /^[0-9]{1,3}$/.test(limitText) ? Number(limitText) : NaN
    if (!(limit >= 1 && limit <= ATTEMPTS_KEPT)) {
      throw new UsageError(`--limit must be an integer from 1 to ${ATTEMPTS_KEPT}; got ${JSON.stringify(limitText)}`)
    }
    const attempts = await withStore(io, (store) => store.webhooks.attempts(id, limit))
    if (attempts === undefined) throw noSuchEndpoint(id)
    if (values.json === true) {
      io.stdout.write(`${JSON.stringify(attempts.map(toApiWebhookAttempt))}\n`)
      return
    }
    const rows = attempts.map((attempt) => [
      attempt.attemptedAt,
      String(attempt.eventId),
      attempt.status === null ? '-' : String(attempt.status),
      attempt.error ?? '-',
      String(attempt.durationMs),
    ])
    printRows(io, ATTEMPT_COLUMNS, rows, `no delivery attempts to webhook endpoint ${id} yet`)
  },
}

export const webhooksRotate: Command = {
  name: ['webhooks', 'rotate'],
  synopsis: 'webhooks rotate ID',
  summary: "give a webhook endpoint a new signing secret and print it (shown only this once)",
  positionals: [ENDPOINT_ID],
  help: `Usage: ${PROGRAM} webhooks rotate ID

Gives the webhook endpoint ID a new signing secret and prints it, alone on one line, on stdout
(the secret is shown only this once). For 24 hours the previous secret signs too: deliveries carry
both signatures, so the receiver can switch to the new secret at its pace. Rotating again within
the 24 hours ends the older secret at once. An unknown ID fails.

Options:
  -h, --help   show this help

Examples:
  SECRET=$(${PROGRAM} webhooks rotate 7)`,
  async run({ positionals }, io) {
    const id = endpointId(positionals[0]!)
    const secret = await withStore(io, (store) => rotateWebhookSecret(store.webhooks, id))
    if (secret === undefined) throw noSuchEndpoint(id)
    io.stdout.write(`${secret}\n`)
    io.stderr.write(`rotated the secret of webhook endpoint ${id}; the previous one signs too for 24 hours; store the new one now: it cannot be shown again\n`)
  },
}

/** `webhooks enable` and `webhooks disable`: the PATCH {"enabled"} of the API. */
function setEnabled(enabled: boolean): Command {
  const verb = enabled ? 'enable' : 'disable'
  return {
    name: ['webhooks', verb],
    synopsis: `webhooks ${verb} ID`,
    summary: enabled ? 'enable a webhook endpoint again, from the position it stopped at' : 'stop delivering to a webhook endpoint; it keeps its position',
    positionals: [ENDPOINT_ID],
    help: enabled
      ? `Usage: ${PROGRAM} webhooks enable ID

Enables the webhook endpoint ID again, whatever disabled it: it is sent the events of its types
after the position it stopped at, in order, with its failures and retries cleared; nothing is lost
within the event feed's retention. An endpoint enabled already is left as it is. An unknown ID
fails.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} webhooks enable 7`
      : `Usage: ${PROGRAM} webhooks disable ID

Disables the webhook endpoint ID (disabled_by_request): nothing more is sent to it (a delivery
already in flight is its last), and it keeps its position, so 'webhooks enable ID' resumes from
there. An unknown ID fails.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} webhooks disable 7`,
    async run({ positionals }, io) {
      const id = endpointId(positionals[0]!)
      const config = loadWebhooksConfig(io.env)
      const endpoint = await withStore(io, async (store) => store.webhooks.update(id, await toEndpointPatch({ enabled }, config)))
      if (endpoint === undefined) throw noSuchEndpoint(id)
      io.stdout.write(`webhook endpoint ${id} ${enabled ? 'enabled' : 'disabled'}, at position ${endpoint.position}\n`)
    },
  }
}

export const webhooksEnable = setEnabled(true)
export const webhooksDisable = setEnabled(false)
