import { stringify as stringifyLossless } from 'lossless-json'
import { loadWebhooksConfig } from '../../config.js'
import { parseInt64 } from '../../domain/int64.js'
import { createWebhookEndpoint, toApiWebhookEndpoint } from '../../domain/webhook-endpoints.js'
import { ApiError } from '../../errors.js'
import { EVENT_POSITION_PATTERN } from '../../schemas/order-event.js'
import { MAX_WEBHOOK_DESCRIPTION_LENGTH, MAX_WEBHOOK_URL_LENGTH } from '../../schemas/webhook-endpoint.js'
import { EventsExpiredError, ORDER_EVENT_TYPES, UnknownEventPositionError, type OrderEventType } from '../../store/order-events.js'
import type { WebhookEndpoint } from '../../store/webhooks.js'
import { CommandError, lowerFirst, PROGRAM, printable, stringOption, UsageError, withStore, type Command } from '../command.js'

const POLICY = `The URL must be https, with no user name or password, and its host must resolve only to public
addresses — unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true, which also allows http and private,
loopback and link-local addresses (tests, on-premises receivers). At most WEBHOOK_MAX_ENDPOINTS
(default 100) endpoints exist.`

/** `--events a,b`: known types, each once; stored in feed-type order. */
function parseEvents(text: string): OrderEventType[] {
  const types = text.split(',').map((type) => type.trim())
  for (const type of types) {
    if (!(ORDER_EVENT_TYPES as readonly string[]).includes(type)) {
      throw new UsageError(`--events: unknown event type ${JSON.stringify(type)} (types: ${ORDER_EVENT_TYPES.join(', ')})`, 'webhooks add')
    }
  }
  if (new Set(types).size !== types.length) throw new UsageError('--events names a type more than once', 'webhooks add')
  return types as OrderEventType[]
}

function endpointId(text: string, command: string): bigint {
  const id = /^[0-9]{1,19}$/.test(text) ? parseInt64(text) : undefined
  if (id === undefined) throw new UsageError(`ID must be an endpoint id, as 'webhooks list' shows it; got ${JSON.stringify(text)}`, command)
  return id
}

/** An API refusal (URL policy, limit) as the one-line error of a command. */
function asCommandError(error: unknown): unknown {
  return error instanceof ApiError ? new CommandError(lowerFirst(error.message)) : error
}

/** Endpoints as the API shows them (never a secret), ids exact. */
function endpointsToJson(endpoints: WebhookEndpoint[]): string {
  return stringifyLossless(endpoints.map(toApiWebhookEndpoint))!
}

export const webhooksAdd: Command = {
  name: ['webhooks', 'add'],
  synopsis: 'webhooks add URL',
  summary: 'create a webhook endpoint and print its signing secret (shown only this once)',
  options: { events: { type: 'string' }, description: { type: 'string' }, json: { type: 'boolean' } },
  positionals: [{ name: 'URL', describe: 'where events are POSTed, e.g. https://hooks.example.com/petstore' }],
  usesDatabase: true,
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
    if (url.length > MAX_WEBHOOK_URL_LENGTH) throw new UsageError(`URL must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`, 'webhooks add')
    const eventsText = stringOption(values, 'events')
    const eventTypes = eventsText === undefined ? undefined : parseEvents(eventsText)
    const description = stringOption(values, 'description')
    if (description !== undefined && description.length > MAX_WEBHOOK_DESCRIPTION_LENGTH) {
      throw new UsageError(`--description must be at most ${MAX_WEBHOOK_DESCRIPTION_LENGTH} characters`, 'webhooks add')
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
  positionals: [],
  usesDatabase: true,
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
      io.stdout.write(`${endpointsToJson(endpoints)}\n`)
      return
    }
    const rows = endpoints.map(endpointColumns)
    if (io.stdout.isTTY !== true) {
      for (const row of rows) io.stdout.write(`${row.join('\t')}\n`)
      return
    }
    if (rows.length === 0) {
      io.stderr.write(`no webhook endpoints yet; create one with '${PROGRAM} webhooks add URL'\n`)
      return
    }
    const table = [[...COLUMNS], ...rows]
    const widths = COLUMNS.map((_, i) => Math.max(...table.map((row) => [...row[i]!].length)))
    for (const row of table) {
      io.stdout.write(`${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')}\n`)
    }
  },
}

export const webhooksRemove: Command = {
  name: ['webhooks', 'remove'],
  synopsis: 'webhooks remove ID',
  summary: 'delete a webhook endpoint and its attempts',
  options: {},
  positionals: [{ name: 'ID', describe: "the endpoint's id, as 'webhooks list' shows it" }],
  usesDatabase: true,
  help: `Usage: ${PROGRAM} webhooks remove ID

Deletes the webhook endpoint ID and its delivery attempts: nothing more is sent to it (a
delivery already in flight is its last). An unknown ID fails.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} webhooks remove 7`,
  async run({ positionals }, io) {
    const id = endpointId(positionals[0]!, 'webhooks remove')
    const removed = await withStore(io, (store) => store.webhooks.remove(id))
    if (!removed) throw new CommandError(`no webhook endpoint has the id ${id}`)
    io.stdout.write(`removed webhook endpoint ${id}\n`)
  },
}

const POSITION = new RegExp(EVENT_POSITION_PATTERN)

export const webhooksReplay: Command = {
  name: ['webhooks', 'replay'],
  synopsis: 'webhooks replay ID --after CURSOR',
  summary: 'send a webhook endpoint every event after a cursor again',
  options: { after: { type: 'string' } },
  positionals: [{ name: 'ID', describe: "the endpoint's id, as 'webhooks list' shows it" }],
  usesDatabase: true,
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
    const id = endpointId(positionals[0]!, 'webhooks replay')
    const text = stringOption(values, 'after')
    if (text === undefined) throw new UsageError('missing --after (the feed cursor to replay after, e.g. --after 1234)', 'webhooks replay')
    const after = POSITION.test(text) ? parseInt64(text) : undefined
    if (after === undefined) throw new UsageError(`--after must be an event id or a feed cursor, a decimal integer; got ${JSON.stringify(text)}`, 'webhooks replay')
    const endpoint = await withStore(io, async (store) => {
      try {
        return await store.webhooks.replay(id, after)
      } catch (error) {
        if (error instanceof EventsExpiredError) throw new CommandError(`events after ${after} have been deleted by retention; replay from a later cursor`)
        if (error instanceof UnknownEventPositionError) throw new CommandError(`${after} is past the end of the event feed`)
        throw error
      }
    })
    if (endpoint === undefined) throw new CommandError(`no webhook endpoint has the id ${id}`)
    io.stdout.write(`webhook endpoint ${id} replays the events after ${after}\n`)
  },
}
