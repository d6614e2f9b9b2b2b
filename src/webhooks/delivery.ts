import http from 'node:http'
import https from 'node:https'
import { performance } from 'node:perf_hooks'
import { LOOKUP_TIMED_OUT } from './resolve-host.js'
import { ADDRESS_NOT_ALLOWED, checkWebhookUrlForm, guardedLookup } from './url-policy.js'

/**
 * At most this much of a response's body is read; past it the connection is dropped. Its head
 * (status line and headers) may be as large: a larger one fails the attempt.
 */
export const MAX_RESPONSE_BYTES = 64 * 1024

/**
 * How long the body of a response is read after its status came. The status decides the attempt;
 * the body is read only so that the connection can be used again, and one still arriving after this
 * (a receiver that trickles it) is not waited for: the connection is dropped.
 */
export const BODY_READ_MS = 1000

/**
 * How one attempt ended. `status` is the HTTP status when a response came; `error` a short,
 * fixed phrase when no 2xx came (never the response body, a secret, or a message from a socket);
 * `retryAfter` the `Retry-After` header of a 429 or 503 as received, unparsed and uncapped (the
 * dispatcher parses and caps it), else undefined; `durationMs` the whole attempt, rounded.
 */
export interface DeliveryResult {
  outcome: 'success' | 'gone' | 'failure' | 'aborted'
  status: number | null
  error: string | null
  retryAfter: string | undefined
  durationMs: number
}

export interface DeliveryRequest {
  url: string
  body: string
  /** The Standard Webhooks headers (signing.ts). */
  headers: Record<string, string>
}

export interface DelivererOptions {
  timeoutMs: number
  allowPrivateNetworks: boolean
  /** The DNS servers host names are resolved with (WEBHOOK_DNS_SERVERS); the system's when none. */
  dnsServers?: readonly string[] | undefined
}

/**
 * Sends deliveries over keep-alive connections (a healthy endpoint costs one round trip per event,
 * not a handshake), each to an address judged by the URL policy when connecting (`guardedLookup`).
 * Redirects are never followed (node:http does not follow them).
 */
export class Deliverer {
  private readonly httpAgent: http.Agent
  private readonly httpsAgent: https.Agent

  constructor(private readonly options: DelivererOptions) {
    const lookup = guardedLookup({ allowPrivateNetworks: options.allowPrivateNetworks, dnsServers: options.dnsServers })
    // Idle sockets are closed before a receiver's usual keep-alive timeout (5 s in Node), so a
    // request is rarely written onto a socket the receiver is closing. The attempt's own deadline
    // is a timer of `deliver`; the agent's timeout only ends idle sockets.
    const agentOptions = { keepAlive: true, lookup, timeout: IDLE_SOCKET_MS, scheduling: 'lifo' as const }
    this.httpAgent = new http.Agent(agentOptions)
    this.httpsAgent = new https.Agent(agentOptions)
  }

  /**
   * One POST of `request`, within `timeoutMs` in all (connect, send, the response's head, then at
   * most BODY_READ_MS and MAX_RESPONSE_BYTES of its body). `signal` aborts it (shutdown): outcome
   * 'aborted'.
   */
  async deliver(request: DeliveryRequest, signal?: AbortSignal): Promise<DeliveryResult> {
    const started = performance.now()
    const finish = (result: Omit<DeliveryResult, 'durationMs' | 'retryAfter'> & { retryAfter?: string }): DeliveryResult => ({
      retryAfter: undefined,
      ...result,
      durationMs: Math.round(performance.now() - started),
    })
    const form = checkWebhookUrlForm(request.url, this.options.allowPrivateNetworks)
    // The URL was checked when set; this catches an IP literal (Node skips `lookup` for one) and a
    // URL that a stricter configuration no longer allows.
    if (!form.ok) return finish({ outcome: 'failure', status: null, error: form.problem.includes('address') ? 'address not allowed' : 'URL not allowed' })
    const deadline = started + this.options.timeoutMs
    let attempt = await this.post(form.url, request, deadline, signal)
    // A keep-alive socket the receiver closed just as it was reused: the request never reached it
    // (Node's documented case for `reusedSocket`), so it is sent again once on a new connection.
    if (attempt.kind === 'error' && attempt.reusedSocket && attempt.code === 'ECONNRESET' && performance.now() < deadline) {
      attempt = await this.post(form.url, request, deadline, signal)
    }
    if (attempt.kind === 'error') {
      if (attempt.code === ABORTED) return finish({ outcome: 'aborted', status: null, error: 'aborted' })
      return finish({ outcome: 'failure', status: null, error: describe(attempt.code) })
    }
    const { status, retryAfter } = attempt
    if (status >= 200 && status <= 299) return finish({ outcome: 'success', status, error: null })
    if (status === 410) return finish({ outcome: 'gone', status, error: 'gone' })
    const error = status >= 300 && status <= 399 ? 'redirect not followed' : `status ${status}`
    return finish({ outcome: 'failure', status, error, ...(status === 429 || status === 503 ? { retryAfter } : {}) })
  }

  /** Closes the idle connections. */
  close(): void {
    this.httpAgent.destroy()
    this.httpsAgent.destroy()
  }

  private post(url: URL, request: DeliveryRequest, deadline: number, signal: AbortSignal | undefined): Promise<Attempt> {
    return new Promise<Attempt>((resolve) => {
      const body = Buffer.from(request.body)
      const secure = url.protocol === 'https:'
      let settled = false
      let status: number | null = null
      let retryAfter: string | undefined
      let bodyTimer: NodeJS.Timeout | undefined
      const settle = (attempt: Attempt): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        clearTimeout(bodyTimer)
        signal?.removeEventListener('abort', onAbort)
        resolve(attempt)
      }
      const fail = (code: string): void => {
        // A response head already came: the status decides, whatever happened to the body.
        if (status !== null) settle({ kind: 'response', status, retryAfter })
        else settle({ kind: 'error', code, reusedSocket: req.reusedSocket })
        req.destroy()
      }
      const onAbort = (): void => fail(ABORTED)
      const timer = setTimeout(() => fail(TIMEOUT), Math.max(0, deadline - performance.now()))
      const req = (secure ? https : http).request(url, {
        method: 'POST',
        agent: secure ? this.httpsAgent : this.httpAgent,
        maxHeaderSize: MAX_RESPONSE_BYTES,
        headers: {
          'content-type': 'application/json',
          'content-length': String(body.length),
          'user-agent': 'petstore-orders-webhooks',
          ...request.headers,
        },
      })
      req.on('error', (error: NodeJS.ErrnoException) => fail(codeOf(error)))
      req.on('response', (res) => {
        status = res.statusCode ?? 0
        const header = res.headers['retry-after']
        retryAfter = Array.isArray(header) ? header[0] : header
        let received = 0
        // Success is the status: a body still arriving after a brief read is not waited for.
        bodyTimer = setTimeout(() => fail(BODY_SLOW), Math.max(0, Math.min(BODY_READ_MS, deadline - performance.now())))
        res.on('data', (chunk: Buffer) => {
          received += chunk.length
          // Past the cap the rest is not read: the connection is dropped instead of drained.
          if (received > MAX_RESPONSE_BYTES) fail(TOO_LARGE)
        })
        res.on('end', () => settle({ kind: 'response', status: status ?? 0, retryAfter }))
        res.on('error', () => fail(RESET))
        res.on('aborted', () => fail(RESET))
      })
      if (signal?.aborted) return fail(ABORTED)
      signal?.addEventListener('abort', onAbort, { once: true })
      req.end(body)
    })
  }
}

type Attempt = { kind: 'response'; status: number; retryAfter: string | undefined } | { kind: 'error'; code: string; reusedSocket: boolean }

const IDLE_SOCKET_MS = 4000
const ABORTED = 'ABORTED'
const TIMEOUT = 'TIMEOUT'
const TOO_LARGE = 'TOO_LARGE'
const BODY_SLOW = 'BODY_SLOW'
const RESET = 'ECONNRESET'

function codeOf(error: NodeJS.ErrnoException): string {
  // With autoSelectFamily a failed connect reports an AggregateError of the addresses tried.
  if (error instanceof AggregateError && error.errors.length > 0) return codeOf(error.errors[0] as NodeJS.ErrnoException)
  return typeof error.code === 'string' ? error.code : 'UNKNOWN'
}

// Fixed phrases: a socket's message can carry a host name or certificate details.
function describe(code: string): string {
  if (code === TIMEOUT || code === 'ETIMEDOUT') return 'timeout'
  if (code === ADDRESS_NOT_ALLOWED) return 'address not allowed'
  if (code === 'ECONNREFUSED') return 'connection refused'
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === TOO_LARGE) return 'connection reset'
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL') return 'host not found'
  if (code === LOOKUP_TIMED_OUT) return 'DNS timeout'
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable'
  if (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || code.includes('CERT') || code === 'EPROTO' || code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE') {
    return 'TLS error'
  }
  return 'connection failed'
}
