// Sending a request: the server URL, the key, the JSON both ways (lossless, so int64 stays exact),
// and an error status turned into a PetstoreApiError.
import { parse, stringify } from 'lossless-json'
import { isRecord } from './decode.js'
import { PetstoreApiError, RequestTimeoutError, unexpected } from './errors.js'

export interface ClientOptions {
  /**
   * A server of the API: its URL ends in the version, as the `servers` of each document do. For
   * `createClient`, `https://api.petstore.example/v1` or `http://127.0.0.1:8080/v1`; for
   * `createV2Client`, the same ending in `/v2`.
   */
  baseUrl: string | URL
  /** An API key (`pso_…`), sent as `Authorization: Bearer <apiKey>`. */
  apiKey: string
  /** The fetch to use; the global one by default. */
  fetch?: typeof globalThis.fetch
  /**
   * How long a request waits for its response to begin (its status and headers) before it fails
   * with a RequestTimeoutError: 60,000 ms by default, `Infinity` for no limit. The body that follows
   * is not bounded (a long list streams for as long as it takes); `events()` bounds its long polls
   * by their own `wait`.
   */
  timeoutMs?: number
}

/** Longer than any answer the service holds back on purpose (a long poll: 30 s and its grace). */
const DEFAULT_TIMEOUT_MS = 60_000

export interface RequestOptions {
  signal?: AbortSignal
}

export type Call = (
  method: string,
  path: string,
  signal: AbortSignal | undefined,
  body?: unknown,
  extraHeaders?: Record<string, string>,
  /** This request's bound on its response's start, in place of the client's `timeoutMs`. */
  timeoutMs?: number,
) => Promise<Response>

/** Sends requests to one server of one version: the key, JSON, errors as PetstoreApiError. */
export function caller(options: ClientOptions, version: 'v1' | 'v2'): Call {
  const base = serverUrl(options.baseUrl, version)
  if (typeof options.apiKey !== 'string' || options.apiKey === '') throw new TypeError('apiKey: an API key is required')
  const fetchImpl = options.fetch ?? globalThis.fetch
  const headers = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json' }
  const jsonHeaders = { ...headers, 'content-type': 'application/json' }
  const clientTimeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  if (typeof clientTimeoutMs !== 'number' || !(clientTimeoutMs > 0)) throw new TypeError('timeoutMs: a number of milliseconds above 0, or Infinity')

  return async (method, path, signal, body, extraHeaders, timeoutMs = clientTimeoutMs) => {
    // The request's own abort, for its timeout: the caller's signal still aborts it too.
    const timeout = new AbortController()
    const timer = Number.isFinite(timeoutMs) ? setTimeout(() => timeout.abort(new RequestTimeoutError(timeoutMs)), timeoutMs) : undefined
    const requestSignal = signal === undefined ? timeout.signal : AbortSignal.any([signal, timeout.signal])
    // lossless-json writes a bigint as a JSON integer, every digit (JSON.stringify refuses one).
    const init: RequestInit =
      body === undefined
        ? { method, headers: { ...headers, ...extraHeaders }, signal: requestSignal, redirect: 'error' }
        : { method, headers: { ...jsonHeaders, ...extraHeaders }, body: stringify(body) ?? 'null', signal: requestSignal, redirect: 'error' }
    let response: Response
    try {
      response = await fetchImpl(new URL(path, base), init)
    } finally {
      clearTimeout(timer) // once the response has begun, its body takes as long as it takes
    }
    if (!response.ok) throw await errorOf(response)
    return response
  }
}

/** The server URL as a base for relative paths: it must end in /v1 or /v2 (a trailing slash is added). */
function serverUrl(baseUrl: string | URL, version: 'v1' | 'v2'): URL {
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    throw new TypeError(`baseUrl: not a URL: ${String(baseUrl)}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('baseUrl: must be an http(s) URL')
  if (!new RegExp(`/${version}/?$`).test(url.pathname)) {
    throw new TypeError(`baseUrl: must be a server of the API, ending in /${version} (got ${url.href})`)
  }
  url.pathname = url.pathname.replace(/\/?$/, '/')
  url.search = ''
  url.hash = ''
  return url
}

export async function readJson(response: Response): Promise<unknown> {
  return parseJson(await response.text(), response)
}

export function parseJson(text: string, response: Response): unknown {
  if (!/^application\/json\b/i.test(response.headers.get('content-type') ?? '')) {
    throw unexpected(response, 'the response is not JSON')
  }
  try {
    return parse(text) // numbers stay LosslessNumber: exact, whatever their size
  } catch {
    throw unexpected(response, 'the response is not valid JSON')
  }
}

async function errorOf(response: Response): Promise<PetstoreApiError> {
  let body: unknown
  try {
    body = await readJson(response)
  } catch {
    body = undefined
  }
  if (isRecord(body) && typeof body.code === 'string' && typeof body.message === 'string') {
    return new PetstoreApiError(response.status, body.code, body.message, response.headers)
  }
  return unexpected(response, `HTTP ${response.status} ${response.statusText}`.trim())
}
