import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { fileProblem } from './file-problem.js'
import { redactUrl } from './redact-url.js'

/**
 * Configuration, from environment variables only, validated once at start. A bad value stops the
 * process with a message naming the variable (README "Configuration" lists them all).
 */
export interface Config {
  host: string
  port: number
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  database: DatabaseConfig
  /** The two servers of the OpenAPI document; both end in /v1. */
  publicBaseUrl: string
  stagingBaseUrl: string
  /** How long a looked-up API key is trusted before it is read again: the revocation bound. */
  keyCacheTtlMs: number
  /** Bytes of serialized order list kept per instance (0: no cache). */
  listCacheMaxBytes: number
  /** The order list: how many lists read the database at once, and how long a response may take to send. */
  list: { databaseStreams: number; sendTimeoutMs: number; maxResponses: number }
  pets: { deprecatedAt: Date; sunsetAt: Date; deprecationLink: string }
  /**
   * The order event feed: events older than `retentionDays` are pruned by the serving process;
   * at most `maxWaiting` long polls are held per instance (past it they are answered at once).
   */
  events: { retentionDays: number; maxWaiting: number }
  /** How long placeOrder's Idempotency-Key records are kept (and a key replays its first response). */
  idempotencyKeyTtlHours: number
  /**
   * Webhooks: a delivery succeeds on a 2xx within `timeoutMs`; a failed one is retried after each
   * delay of `retryScheduleMs` in turn (±10%), then the endpoint is disabled. `allowPrivateNetworks`
   * lets URLs reach loopback and private addresses, and http (tests, on-premises). At most
   * `maxEndpoints` endpoints. Host names are resolved with `dnsServers`, the system's when undefined.
   */
  webhooks: {
    timeoutMs: number
    retryScheduleMs: number[]
    allowPrivateNetworks: boolean
    maxEndpoints: number
    concurrency: number
    dnsServers: string[] | undefined
  }
  /** Requests per minute; 0 turns a limit off. With `redisUrl` the counters are shared by all instances. */
  rateLimit: { perKeyPerMinute: number; authFailuresPerMinute: number; redisUrl: string | undefined; redisPrefix: string }
  /** The proxies (addresses or CIDRs) whose X-Forwarded-For gives the client's address; false: none. */
  trustProxy: false | string[]
  shutdownTimeoutMs: number
  /** How long a request's statement waits for PostgreSQL's answer before it is unavailable (503). */
  databaseQueryTimeoutMs: number
  /**
   * OpenTelemetry traces, off (undefined) unless the standard OTEL_* variables ask for them. The
   * protocol and the endpoint are ours to read; every other setting is the SDK's own, read from the
   * environment.
   */
  tracing: TracingConfig | undefined
  http: {
    headersTimeoutMs: number
    requestTimeoutMs: number
    keepAliveTimeoutMs: number
    idleTimeoutMs: number
    maxHeaderSize: number
    /** Open connections per instance; past it a new one is closed at once (Node's server.maxConnections). */
    maxConnections: number
  }
}

export interface TracingConfig {
  /** OTLP over HTTP, as protobuf (the default) or JSON. */
  protocol: (typeof OTLP_PROTOCOLS)[number]
  /**
   * The URL traces are posted to, read as the SDK would read it and given to the exporter, so that
   * the start line names the URL in use: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
   * OTEL_EXPORTER_OTLP_ENDPOINT with `/v1/traces` appended, else the SDK's default.
   */
  endpoint: string
  /**
   * The exporter's header variables that were given as files (NAME_FILE), under the names the SDK
   * reads: the SDK reads the variables themselves, not their files.
   */
  headersFromFiles: Partial<Record<HeadersSetting, string>>
}

export type DatabaseConfig = { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string; poolSize: number }

export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    // A value shown in the problem may be a URL with a password in it.
    super(`${variable}: ${redactUrl(problem)}`)
    this.name = 'ConfigError'
  }
}

type Env = Record<string, string | undefined>

/**
 * Every environment variable this service reads, in one list: the readers below take only these
 * names, the warning about unknown variables (unknown-variables.ts) knows them from here, and
 * test/readme-configuration.test.ts holds the README's Configuration table to it. The
 * OpenTelemetry variables are those read here; the SDK reads its others itself.
 */
export const SETTINGS = [
  'DATABASE_URL',
  'DATABASE_POOL_SIZE',
  'DATABASE_QUERY_TIMEOUT_MS',
  'HOST',
  'PORT',
  'LOG_LEVEL',
  'PUBLIC_BASE_URL',
  'STAGING_BASE_URL',
  'KEY_CACHE_TTL_MS',
  'LIST_CACHE_MAX_BYTES',
  'LIST_DATABASE_STREAMS',
  'LIST_SEND_TIMEOUT_MS',
  'LIST_MAX_RESPONSES',
  'PETS_DEPRECATED_AT',
  'PETS_SUNSET_AT',
  'PETS_DEPRECATION_LINK',
  'SHUTDOWN_TIMEOUT_MS',
  'HTTP_HEADERS_TIMEOUT_MS',
  'HTTP_REQUEST_TIMEOUT_MS',
  'HTTP_KEEP_ALIVE_TIMEOUT_MS',
  'HTTP_IDLE_TIMEOUT_MS',
  'HTTP_MAX_HEADER_SIZE',
  'HTTP_MAX_CONNECTIONS',
  'RATE_LIMIT_PER_KEY',
  'RATE_LIMIT_AUTH_FAILURES',
  'REDIS_URL',
  'RATE_LIMIT_REDIS_PREFIX',
  'EVENTS_RETENTION_DAYS',
  'EVENTS_MAX_WAITING',
  'IDEMPOTENCY_KEY_TTL_HOURS',
  'WEBHOOK_TIMEOUT_MS',
  'WEBHOOK_RETRY_SCHEDULE',
  'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
  'WEBHOOK_MAX_ENDPOINTS',
  'WEBHOOK_CONCURRENCY',
  'WEBHOOK_DNS_SERVERS',
  'TRUST_PROXY',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
  'OTEL_TRACES_EXPORTER',
  'OTEL_SDK_DISABLED',
  'PETSTORE_DEBUG',
] as const

export type Setting = (typeof SETTINGS)[number]

/**
 * The settings that may hold a secret (a password, a collector's API key). Each may instead be
 * given as NAME_FILE, naming a file that holds the value, as Docker and Kubernetes mount secrets.
 */
export const SECRET_SETTINGS = ['DATABASE_URL', 'REDIS_URL', 'OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'] as const satisfies readonly Setting[]

export type SecretSetting = (typeof SECRET_SETTINGS)[number]
type HeadersSetting = Extract<SecretSetting, `${string}_HEADERS`>

/**
 * Names that once were settings, or were documented as such, and the setting to use instead: a
 * server given one refuses to start rather than ignore it.
 */
export const RETIRED_SETTINGS: Readonly<Record<string, Setting>> = { RATE_LIMIT_REDIS_URL: 'REDIS_URL' }

/** Every variable name this service reads: the settings, and the secrets' NAME_FILE forms. */
export const KNOWN_VARIABLES: ReadonlySet<string> = new Set<string>([...SETTINGS, ...SECRET_SETTINGS.map((name) => `${name}_FILE`)])

/**
 * The variable that sets a secret setting: NAME_FILE, NAME, or undefined when neither is set (an
 * empty value is unset, as for every setting).
 */
export function secretSource(env: Env, name: SecretSetting): string | undefined {
  if ((env[`${name}_FILE`] ?? '') !== '') return `${name}_FILE`
  return (env[name] ?? '') !== '' ? name : undefined
}

/**
 * A secret setting's value, from NAME or from the file NAME_FILE names, never both; undefined when
 * neither is set. A file's content is taken without the whitespace at either end (the newline that
 * `echo` ends a file with, a Windows line end, a byte-order mark): no value of these settings may
 * begin or end with whitespace. An empty file is refused: a secret mounted empty is a mistake.
 * Neither the value nor any part of the file is ever shown; the path is. `source` is what an error
 * about the value names.
 */
function secret(env: Env, name: SecretSetting): { value: string; source: string } | undefined {
  const fileVariable = secretSource(env, name)
  if (fileVariable === undefined) return undefined
  if (fileVariable === name) return { value: env[name]!, source: name }
  if ((env[name] ?? '') !== '') throw new ConfigError(fileVariable, `cannot be set with ${name}: set one or the other`)
  const path = env[fileVariable]!
  let content: string
  try {
    content = readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError(fileVariable, `cannot read ${path}: ${fileProblem(error)}`)
  }
  const value = content.trim()
  if (value === '') throw new ConfigError(fileVariable, `${path} is empty`)
  return { value, source: `${name} (read from ${fileVariable})` }
}

/**
 * Said after the problem with a variable whose value may hold a secret (DATABASE_URL, REDIS_URL: a
 * password): such a value is never shown, not even redacted, since no redaction can be sure where a
 * password with a space or a quote in it ends.
 */
const NOT_SHOWN = '(its value is not shown: it may hold a password)'
const SECRET_NOT_SHOWN = `is not a valid URL ${NOT_SHOWN}`

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const
/** Where the OpenTelemetry SDK sends traces when no endpoint is named. */
const DEFAULT_OTLP_TRACES_ENDPOINT = 'http://localhost:4318/v1/traces'
const DEFAULT_SQLITE_PATH = './data/petstore.db'

export function loadConfig(env: Env = process.env): Config {
  // Refused rather than ignored: a RATE_LIMIT_REDIS_URL ignored would count per instance.
  for (const [retired, instead] of Object.entries(RETIRED_SETTINGS)) {
    if ((env[retired] ?? '') !== '') throw new ConfigError(retired, `is not read: set ${instead} instead`)
  }
  const http: Config['http'] = {
    headersTimeoutMs: integer(env, 'HTTP_HEADERS_TIMEOUT_MS', 10_000, 1, 600_000),
    requestTimeoutMs: integer(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 1, 3_600_000),
    keepAliveTimeoutMs: integer(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000, 1, 600_000),
    idleTimeoutMs: integer(env, 'HTTP_IDLE_TIMEOUT_MS', 60_000, 1, 3_600_000),
    maxHeaderSize: integer(env, 'HTTP_MAX_HEADER_SIZE', 16_384, 1024, 1_048_576),
    maxConnections: integer(env, 'HTTP_MAX_CONNECTIONS', 4096, 1, 1_000_000),
  }
  // The headers are part of the request: Node refuses a server whose headers may take longer.
  if (http.headersTimeoutMs > http.requestTimeoutMs) {
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS', `must be at most HTTP_REQUEST_TIMEOUT_MS (${http.requestTimeoutMs}), got ${http.headersTimeoutMs}`)
  }
  const database = loadDatabaseConfig(env)
  // What LIST_DATABASE_STREAMS must stay below; SQLite has no pool.
  const poolSize = database.kind === 'postgres' ? database.poolSize : Infinity
  return {
    host: string(env, 'HOST', '127.0.0.1'),
    port: integer(env, 'PORT', 8080, 0, 65535),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    database,
    publicBaseUrl: baseUrl(env, 'PUBLIC_BASE_URL', 'https://api.petstore.example/v1'),
    stagingBaseUrl: baseUrl(env, 'STAGING_BASE_URL', 'https://staging.api.petstore.example/v1'),
    keyCacheTtlMs: integer(env, 'KEY_CACHE_TTL_MS', 2000, 0, 60_000),
    listCacheMaxBytes: integer(env, 'LIST_CACHE_MAX_BYTES', 256 * 1024 * 1024, 0, 16 * 1024 ** 3),
    list: listConfig(env, poolSize),
    pets: petsDeprecation(env),
    events: eventsConfig(env, http.maxConnections),
    idempotencyKeyTtlHours: integer(env, 'IDEMPOTENCY_KEY_TTL_HOURS', 24, 1, 8760),
    webhooks: loadWebhooksConfig(env),
    rateLimit: {
      perKeyPerMinute: integer(env, 'RATE_LIMIT_PER_KEY', 1200, 0, 10_000_000),
      authFailuresPerMinute: integer(env, 'RATE_LIMIT_AUTH_FAILURES', 30, 0, 10_000_000),
      redisUrl: redisUrl(env),
      redisPrefix: string(env, 'RATE_LIMIT_REDIS_PREFIX', 'petstore:rl:'),
    },
    trustProxy: trustProxy(env),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    databaseQueryTimeoutMs: integer(env, 'DATABASE_QUERY_TIMEOUT_MS', 30_000, 100, 3_600_000),
    tracing: tracingConfig(env),
    http,
  }
}

/**
 * Traces are exported when an OTLP endpoint is named (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER is `otlp` (then to the SDK's default,
 * http://localhost:4318), unless OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is `none`. A
 * variable such as OTEL_SERVICE_NAME alone turns nothing on: a service that sends nowhere loads no SDK.
 */
export function tracingConfig(env: Env = process.env): TracingConfig | undefined {
  // Read whether tracing is on or not: a header file that cannot be read is wrong either way.
  const headersFromFiles: TracingConfig['headersFromFiles'] = {}
  for (const name of ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'] as const) {
    const headers = secret(env, name)
    if (headers !== undefined && headers.source !== name) headersFromFiles[name] = headers.value
  }
  // The specification's boolean: true in any case, anything else false.
  if ((env.OTEL_SDK_DISABLED ?? '').toLowerCase() === 'true') return undefined
  const exporter = env.OTEL_TRACES_EXPORTER ?? ''
  if (exporter === 'none') return undefined
  if (exporter !== '' && exporter !== 'otlp') {
    throw new ConfigError('OTEL_TRACES_EXPORTER', `must be otlp or none (traces are exported over OTLP only), got "${exporter}"`)
  }
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_ENDPOINT'] as const) {
    const value = env[name] ?? ''
    if (value !== '' && !/^https?:$/.test(URL.canParse(value) ? new URL(value).protocol : '')) {
      throw new ConfigError(name, `must be an http:// or https:// URL, got "${value}"`)
    }
  }
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? ''
  const baseEndpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT ?? ''
  if (exporter === '' && tracesEndpoint === '' && baseEndpoint === '') return undefined
  const endpoint =
    tracesEndpoint !== '' ? new URL(tracesEndpoint).href : baseEndpoint !== '' ? `${baseEndpoint.replace(/\/?$/, '/')}v1/traces` : DEFAULT_OTLP_TRACES_ENDPOINT
  // The signal's own variable wins over the general one, as in every OpenTelemetry SDK.
  const variable: Setting = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? '') !== '' ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL'
  const protocol = env[variable] ?? ''
  if (protocol === '') return { protocol: 'http/protobuf', endpoint, headersFromFiles }
  if (!(OTLP_PROTOCOLS as readonly string[]).includes(protocol)) {
    // `json` or `HTTP/JSON` for http/json: the one meant, said.
    const meant = OTLP_PROTOCOLS.find((known) => known === protocol.toLowerCase() || known === `http/${protocol.toLowerCase()}`)
    const hint = meant === undefined ? '' : `; did you mean ${meant}?`
    throw new ConfigError(variable, `must be http/protobuf or http/json (grpc is not supported), got "${protocol}"${hint}`)
  }
  return { protocol: protocol as TracingConfig['protocol'], endpoint, headersFromFiles }
}

/** The WEBHOOK_* variables alone: the CLI's webhook commands apply the same URL policy and limit as the API. */
export function loadWebhooksConfig(env: Env = process.env): Config['webhooks'] {
  return {
    timeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 15_000, 100, 300_000),
    retryScheduleMs: durations(env, 'WEBHOOK_RETRY_SCHEDULE', '5s,5m,30m,2h,5h,10h,14h,20h,24h'),
    allowPrivateNetworks: boolean(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
    maxEndpoints: integer(env, 'WEBHOOK_MAX_ENDPOINTS', 100, 1, 10_000),
    // Delivery slots per instance: by default as many as the default cap on endpoints.
    concurrency: integer(env, 'WEBHOOK_CONCURRENCY', 100, 1, 10_000),
    dnsServers: dnsServers(env, 'WEBHOOK_DNS_SERVERS'),
  }
}

/**
 * Comma-separated IP addresses of DNS servers, each with an optional port, as dns.setServers takes
 * them (10.0.0.2, 10.0.0.2:5353, fd00::53, [fd00::53]:5353); undefined when unset.
 */
function dnsServers(env: Env, name: Setting): string[] | undefined {
  const value = env[name]
  if (value === undefined || value === '') return undefined
  const entries = value.split(',').map((entry) => entry.trim())
  for (const entry of entries) {
    const [, address = entry, port] = /^\[(.*)\](?::([0-9]{1,5}))?$/.exec(entry) ?? /^([^:]*):([0-9]{1,5})$/.exec(entry) ?? []
    const bracketed = entry.startsWith('[')
    const family = isIP(address)
    if (family === 0 || (bracketed && family !== 6) || (port !== undefined && !(Number(port) >= 1 && Number(port) <= 65535))) {
      throw new ConfigError(name, `must be comma-separated IP addresses of DNS servers, each with an optional port (10.0.0.2:5353, [fd00::53]:5353), got "${entry}"`)
    }
  }
  return entries
}

/** PETSTORE_DEBUG=1: a CLI error that was not expected also prints its stack trace. */
export function debugging(env: Env = process.env): boolean {
  return env.PETSTORE_DEBUG === '1'
}

/** DATABASE_URL: unset → the embedded SQLite file; postgres:// → PostgreSQL; sqlite:PATH → that file. */
export function loadDatabaseConfig(env: Env = process.env): DatabaseConfig {
  const database = secret(env, 'DATABASE_URL')
  if (database === undefined) return { kind: 'sqlite', path: DEFAULT_SQLITE_PATH }
  const { value: url, source } = database
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    if (!URL.canParse(url)) throw new ConfigError(source, SECRET_NOT_SHOWN)
    return { kind: 'postgres', url, poolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 1000) }
  }
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '')
    if (path === '' || path === ':memory:') throw new ConfigError(source, 'sqlite: needs a file path')
    return { kind: 'sqlite', path }
  }
  throw new ConfigError(source, 'must be a postgres://, postgresql:// or sqlite: URL (unset: the embedded SQLite file)')
}

/**
 * LIST_DATABASE_STREAMS bounds the lists read from the database at once (each holds a connection
 * for a second or so at a million orders, whatever its clients do); on PostgreSQL it must stay
 * below DATABASE_POOL_SIZE so that a connection is always left for everything else.
 */
function listConfig(env: Env, poolSize: number): Config['list'] {
  const databaseStreams = integer(env, 'LIST_DATABASE_STREAMS', Math.max(1, Math.min(2, poolSize - 1)), 1, 64)
  if (poolSize > 1 && databaseStreams >= poolSize) {
    throw new ConfigError('LIST_DATABASE_STREAMS', `must be below DATABASE_POOL_SIZE (${poolSize}), got "${databaseStreams}"`)
  }
  return {
    databaseStreams,
    sendTimeoutMs: integer(env, 'LIST_SEND_TIMEOUT_MS', 600_000, 1000, 86_400_000),
    maxResponses: integer(env, 'LIST_MAX_RESPONSES', 64, 1, 100_000),
  }
}

/**
 * A held long poll keeps its connection open: EVENTS_MAX_WAITING must stay below
 * HTTP_MAX_CONNECTIONS so that held requests can never take every connection of an instance.
 */
function eventsConfig(env: Env, maxConnections: number): Config['events'] {
  const maxWaiting = integer(env, 'EVENTS_MAX_WAITING', Math.min(1000, Math.floor(maxConnections / 2)), 0, 100_000)
  if (maxWaiting > 0 && maxWaiting >= maxConnections) {
    throw new ConfigError('EVENTS_MAX_WAITING', `must be below HTTP_MAX_CONNECTIONS (${maxConnections}), got "${maxWaiting}"`)
  }
  return { retentionDays: integer(env, 'EVENTS_RETENTION_DAYS', 30, 1, 36_500), maxWaiting }
}

function string(env: Env, name: Setting, fallback: string): string {
  return env[name] || fallback // unset or empty
}

function integer(env: Env, name: Setting, fallback: number, min: number, max: number): number {
  const value = env[name]
  if (value === undefined || value === '') return fallback
  if (!/^[0-9]+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(name, `must be an integer from ${min} to ${max}, got "${value}"`)
  }
  return Number(value)
}

function boolean(env: Env, name: Setting, fallback: boolean): boolean {
  const value = env[name]
  if (value === undefined || value === '') return fallback
  if (value !== 'true' && value !== 'false') throw new ConfigError(name, `must be true or false, got "${value}"`)
  return value === 'true'
}

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Comma-separated durations such as `5s,5m,2h` (units ms, s, m, h, d), each from 1 ms to 7 days, 1 to 50 of them. */
function durations(env: Env, name: Setting, fallback: string): number[] {
  const value = string(env, name, fallback)
  const parts = value.split(',').map((part) => part.trim())
  const parsed = parts.map((part) => {
    const match = /^([0-9]{1,9})(ms|s|m|h|d)$/.exec(part)
    return match === null ? NaN : Number(match[1]) * DURATION_UNITS_MS[match[2]!]!
  })
  if (parts.length > 50 || parsed.some((ms) => !(ms >= 1 && ms <= 7 * 86_400_000))) {
    throw new ConfigError(name, `must be 1 to 50 comma-separated durations such as 5s,5m,2h (units ms, s, m, h, d; each at most 7d), got "${value}"`)
  }
  return parsed
}

function oneOf<T extends string>(env: Env, name: Setting, values: readonly T[], fallback: T): T {
  const value = env[name]
  if (value === undefined || value === '') return fallback
  if (!(values as readonly string[]).includes(value)) {
    throw new ConfigError(name, `must be one of ${values.join(', ')}, got "${value}"`)
  }
  return value as T
}

function baseUrl(env: Env, name: Setting, fallback: string): string {
  const value = string(env, name, fallback).replace(/\/+$/, '')
  if (!URL.canParse(value)) throw new ConfigError(name, `is not a valid URL: "${value}"`)
  const url = new URL(value)
  if (!['http:', 'https:'].includes(url.protocol) || !url.pathname.endsWith('/v1')) {
    throw new ConfigError(name, `must be an http(s) URL ending in /v1, got "${value}"`)
  }
  return value
}

function date(env: Env, name: Setting, fallback: string): Date {
  const value = string(env, name, fallback)
  const parsed = new Date(value)
  if (!/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/.test(value) || Number.isNaN(parsed.getTime())) {
    throw new ConfigError(name, `must be an RFC 3339 date or date-time, got "${value}"`)
  }
  return parsed
}

function petsDeprecation(env: Env): Config['pets'] {
  const deprecatedAt = date(env, 'PETS_DEPRECATED_AT', '2026-01-01T00:00:00Z')
  const sunsetAt = date(env, 'PETS_SUNSET_AT', '2027-07-01T00:00:00Z')
  if (sunsetAt <= deprecatedAt) throw new ConfigError('PETS_SUNSET_AT', 'must be later than PETS_DEPRECATED_AT')
  const deprecationLink = string(env, 'PETS_DEPRECATION_LINK', 'https://docs.petstore.example/v1/deprecations#pets')
  if (!URL.canParse(deprecationLink)) throw new ConfigError('PETS_DEPRECATION_LINK', `is not a valid URL: "${deprecationLink}"`)
  return { deprecatedAt, sunsetAt, deprecationLink }
}

function redisUrl(env: Env): string | undefined {
  const redis = secret(env, 'REDIS_URL')
  if (redis === undefined) return undefined
  const { value, source } = redis
  // `localhost:6379` parses as a URL of the scheme `localhost:`: the form is what to say.
  const scheme = URL.canParse(value) ? new URL(value).protocol : undefined
  if (scheme !== 'redis:' && scheme !== 'rediss:') {
    throw new ConfigError(source, `must be a URL of the form redis://HOST:6379, or rediss://HOST:6379 for TLS ${NOT_SHOWN}`)
  }
  return value
}

/** TRUST_PROXY: comma-separated addresses or CIDRs of the proxies in front (Fastify's trustProxy). */
function trustProxy(env: Env): false | string[] {
  const value = env.TRUST_PROXY
  if (value === undefined || value === '') return false
  const entries = value.split(',').map((entry) => entry.trim())
  for (const entry of entries) {
    const [address = '', bits, extra] = entry.split('/')
    const version = isIP(address)
    const maxBits = version === 6 ? 128 : 32
    if (version === 0 || extra !== undefined || (bits !== undefined && !(/^[0-9]{1,3}$/.test(bits) && Number(bits) <= maxBits))) {
      throw new ConfigError('TRUST_PROXY', `must be comma-separated IP addresses or CIDRs of the proxies, got "${entry}"`)
    }
  }
  return entries
}
