import type { Config } from '../config.js'
import { canonicalEventTypes } from '../domain/order-events.js'
import { newWebhookSecret, PREVIOUS_SECRET_SIGNS_MS, type WebhookAttempt, type WebhookEndpoint, type WebhookEndpointPatch } from '../domain/webhooks.js'
import { ApiError } from '../errors.js'
import {
  MAX_WEBHOOK_URL_LENGTH,
  type CreateWebhookEndpointBody,
  type WebhookEndpoint as ApiWebhookEndpoint,
  type WebhookAttempt as ApiWebhookAttempt,
} from '../schemas/webhook-endpoint.js'
import type { WebhooksRepository } from '../store/webhooks.js'
import { toApiPingResult } from './ping.js'
import { checkWebhookUrl } from './url-policy.js'

/** Webhook endpoints managed, for the API and the CLI alike; what a change does to one is domain/webhooks.ts's. */

/** What a refusal that WEBHOOK_ALLOW_PRIVATE_NETWORKS would lift adds, so the setting is found where it is needed. */
const PRIVATE_NETWORKS_SETTING = 'set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow private networks and http (tests, on-premises)'

/**
 * A URL the policy allows, as a delivery calls it: as the URL parser writes it (`HTTP://` is
 * `http://`, a full-width digit a digit, `/a/../b` is `/b`), without a fragment or an empty query's
 * `?` (neither is sent), and at most MAX_WEBHOOK_URL_LENGTH characters so written (percent-encoding
 * may lengthen it), so that the URL shown can be sent back. Else 400 `invalid_webhook_url` saying
 * what is wrong with it (never an address it resolved to) and, when WEBHOOK_ALLOW_PRIVATE_NETWORKS
 * would allow it, saying so.
 */
export async function allowedWebhookUrl(url: string, config: Config['webhooks']): Promise<string> {
  const check = await checkWebhookUrl(url, { allowPrivateNetworks: config.allowPrivateNetworks, dnsServers: config.dnsServers })
  if (!check.ok) {
    const setting = check.privateNetworksAllow ? `; ${PRIVATE_NETWORKS_SETTING}` : ''
    throw new ApiError('invalid_webhook_url', `The webhook URL ${check.problem}${setting}.`)
  }
  const { url: called } = check
  called.hash = ''
  if (called.search === '') called.search = ''
  if (called.href.length > MAX_WEBHOOK_URL_LENGTH) {
    throw new ApiError(
      'invalid_webhook_url',
      `The webhook URL must be at most ${MAX_WEBHOOK_URL_LENGTH} characters as it is called (percent-encoded): it is ${called.href.length}.`,
    )
  }
  return called.href
}

/**
 * Creates an endpoint, for the API and the CLI alike: the URL policy first, then the cap, which the
 * store checks in the endpoint's own transaction (two creations at once cannot both pass it).
 */
export async function createWebhookEndpoint(
  repository: WebhooksRepository,
  config: Config['webhooks'],
  input: CreateWebhookEndpointBody,
): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
  const url = await allowedWebhookUrl(input.url, config)
  const secret = newWebhookSecret()
  const description = input.description === undefined || input.description === '' ? null : input.description
  const created = await repository.create({ url, eventTypes: canonicalEventTypes(input.eventTypes), description, secret }, config.maxEndpoints)
  if (created === 'too_many') {
    throw new ApiError('webhook_endpoint_limit', `${config.maxEndpoints} webhook endpoints exist, as many as WEBHOOK_MAX_ENDPOINTS allows; delete one first.`)
  }
  return { endpoint: created, secret }
}

/** A PATCH body as the store takes it (patchEndpoint applies it): its URL checked first. */
export async function toEndpointPatch(body: WebhookEndpointPatch, config: Config['webhooks']): Promise<WebhookEndpointPatch> {
  return body.url === undefined ? body : { ...body, url: await allowedWebhookUrl(body.url, config) }
}

/** The endpoint as the API shows it: unknown values omitted, never null; the position a cursor string. */
export function toApiWebhookEndpoint(endpoint: WebhookEndpoint): ApiWebhookEndpoint {
  const shown: ApiWebhookEndpoint = {
    id: endpoint.id,
    url: endpoint.url,
    eventTypes: endpoint.eventTypes,
    status: endpoint.enabled ? 'enabled' : 'disabled',
    position: endpoint.position.toString(),
    createdAt: endpoint.createdAt,
  }
  if (endpoint.description !== null) shown.description = endpoint.description
  if (!endpoint.enabled && endpoint.disabledReason !== null) shown.disabledReason = endpoint.disabledReason
  if (endpoint.failingSince !== null) shown.failingSince = endpoint.failingSince
  if (endpoint.nextAttemptAt !== null) shown.nextAttemptAt = endpoint.nextAttemptAt
  return shown
}

export function toApiWebhookAttempt(attempt: WebhookAttempt): ApiWebhookAttempt {
  return { eventId: attempt.eventId.toString(), attemptedAt: attempt.attemptedAt, ...toApiPingResult(attempt) }
}

/**
 * Gives the endpoint a new signing secret: the one it replaces keeps signing for
 * PREVIOUS_SECRET_SIGNS_MS from `now` (an older one stops at once). The new secret, or undefined
 * when there is no such endpoint.
 */
export async function rotateWebhookSecret(repository: WebhooksRepository, id: bigint, now = new Date()): Promise<string | undefined> {
  const secret = newWebhookSecret()
  return (await repository.rotateSecret(id, secret, new Date(now.getTime() + PREVIOUS_SECRET_SIGNS_MS))) ? secret : undefined
}
