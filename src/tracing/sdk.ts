import { createRequire } from 'node:module'
import { diag, DiagLogLevel } from '@opentelemetry/api'
import { registerInstrumentations } from '@opentelemetry/instrumentation'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, NodeTracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace-node'
import type pino from 'pino'
import type { TracingConfig } from '../config.js'

/** Tracing, started. */
export interface Tracing {
  /**
   * Exports the spans still held, then stops: a collector that does not answer holds it for the
   * exporter's own timeout (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default), then they are dropped.
   */
  shutdown(): Promise<void>
}

/**
 * Starts the OpenTelemetry SDK, loaded only when tracing is on (this module is imported
 * dynamically). Everything but the protocol and the endpoint is the SDK's own configuration, read
 * from the environment: the exporter's OTEL_EXPORTER_OTLP_* (headers, timeout, compression), the
 * sampler's OTEL_TRACES_SAMPLER(_ARG), the batch processor's OTEL_BSP_*, and OTEL_SERVICE_NAME and
 * OTEL_RESOURCE_ATTRIBUTES over our own service.name. Must run before pg is first loaded: its
 * instrumentation patches the module as it is required.
 */
export async function startTracing(config: TracingConfig, log: pino.Logger): Promise<Tracing> {
  // The SDK's own complaints (an export that failed, a bad sampler) go to our log, not nowhere.
  const sdkLog = log.child({ component: 'opentelemetry' })
  diag.setLogger(
    {
      error: (message, ...args) => sdkLog.error({ args }, message),
      warn: (message, ...args) => sdkLog.warn({ args }, message),
      info: (message, ...args) => sdkLog.info({ args }, message),
      debug: (message, ...args) => sdkLog.debug({ args }, message),
      verbose: (message, ...args) => sdkLog.trace({ args }, message),
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  )
  // Header variables given as files reach the SDK as the variables it reads, parsed by its own
  // rules; in this process's environment only, and never written anywhere.
  Object.assign(process.env, config.headersFromFiles)
  const provider = new NodeTracerProvider({
    resource: defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'petstore-orders', 'service.version': packageVersion() }))
      .merge(detectResources({ detectors: [envDetector] })),
    spanProcessors: [new BatchSpanProcessor(await exporter(config))],
  })
  // The global tracer provider, W3C trace context and baggage propagation, AsyncLocalStorage context.
  provider.register()
  registerInstrumentations({
    instrumentations: [
      // Statements outside a traced request or delivery (lease passes, pruning, LISTEN) are not
      // worth a trace each; parameter values are never recorded (enhancedDatabaseReporting is off).
      new PgInstrumentation({ requireParentSpan: true }),
    ],
  })
  // Loaded through require, now patched; the ESM imports of the store then get this same module.
  createRequire(import.meta.url)('pg')
  return {
    // A failed last export is the collector's fault, not a failed stop: said, and the stop goes on.
    shutdown: () => provider.shutdown().catch((error: unknown) => sdkLog.warn({ err: error }, 'the last spans could not be exported')),
  }
}

/** The OTLP/HTTP exporter, to the endpoint the configuration read (and the start line names). */
async function exporter({ protocol, endpoint }: TracingConfig): Promise<SpanExporter> {
  if (protocol === 'http/json') return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter({ url: endpoint })
  return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter({ url: endpoint })
}

function packageVersion(): string {
  return (createRequire(import.meta.url)('../../package.json') as { version: string }).version
}
