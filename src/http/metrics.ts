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

  constructor(options: { processMetrics: boolean }) {
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry })
  }

  cancelled(outcome: CancelOutcome | 'error'): void {
    this.cancels.inc({ outcome })
  }

  register(app: FastifyInstance): void {
    app.addHook('onResponse', async (request, reply) => {
      // The route pattern, not the URL: ids must not explode the label set.
      const labels = { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: reply.statusCode }
      this.requests.inc(labels)
      this.durations.observe(labels, reply.elapsedTime / 1000)
    })
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      return reply.type(this.registry.contentType).send(await this.registry.metrics())
    })
  }
}
