import type { FastifyInstance } from 'fastify'
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client'
import type { CancelOutcome } from '../domain/orders.js'

/** Prometheus metrics of one app instance: its own registry, so tests can build many apps. */
export class Metrics {
  readonly registry = new Registry()
  readonly requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
    // A request adds one to a plain number on its series; the sums reach the counter when scraped.
    collect: () => {
      for (const series of this.series.values()) {
        if (series.uncounted === 0) continue
        series.requests.inc(series.uncounted)
        series.uncounted = 0
      }
    },
  })
  readonly durations = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request durations by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  })
  readonly cancels = new Counter({
    name: 'orders_cancel_total',
    help: 'cancelOrder calls by outcome',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  })

  // The labelled series of each method, route and status, looked up once. prom-client still
  // validates and hashes the labels on every call, so requests are counted here and handed to it
  // when scraped (see `requests`); only the duration is observed per request.
  private readonly series = new Map<string, { requests: Counter.Internal; durations: Histogram.Internal<string>; uncounted: number }>()

  constructor(options: { processMetrics: boolean }) {
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry })
  }

  cancelled(outcome: CancelOutcome | 'error'): void {
    this.cancels.inc({ outcome })
  }

  register(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      // The route pattern, not the URL: ids must not explode the label set.
      const route = request.routeOptions.url ?? 'unmatched'
      const id = `${request.method} ${reply.statusCode} ${route}`
      let series = this.series.get(id)
      if (series === undefined) {
        const labels = { method: request.method, route, status: reply.statusCode }
        series = { requests: this.requests.labels(labels), durations: this.durations.labels(labels), uncounted: 0 }
        this.series.set(id, series)
      }
      series.uncounted++
      series.durations.observe(reply.elapsedTime / 1000)
      done()
    })
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      return reply.type(this.registry.contentType).send(await this.registry.metrics())
    })
  }
}
