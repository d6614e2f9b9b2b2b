import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { UpdateOutcome } from '../domain/order-patch.js'
import type { CancelOutcome, CompleteOutcome, PlaceResult, ShipOutcome } from '../domain/orders.js'

interface Series {
  requests: Counter.Internal
  durations: Histogram.Internal<'method' | 'route' | 'status'>
  /** Requests not yet added to `requests` (see Metrics.requests). */
  uncounted: number
}

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
  private readonly cancels = this.outcomes('cancel')
  private readonly places = this.outcomes('place')
  private readonly ships = this.outcomes('ship')
  private readonly completes = this.outcomes('complete')
  private readonly updates = this.outcomes('update')

  readonly webhookDeliveries = new Counter({
    name: 'webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome (success, failure, gone, aborted)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  })
  readonly webhookDurations = new Histogram({
    name: 'webhook_delivery_duration_seconds',
    help: 'Webhook delivery attempt durations by outcome',
    labelNames: ['outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  })

  // The series of every method, route and status seen, for the collect above.
  private readonly series = new Map<string, Series>()

  constructor(options: { processMetrics: boolean; eventWaiters?: () => number }) {
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry })
    const { eventWaiters } = options
    if (eventWaiters !== undefined) {
      new Gauge({
        name: 'order_events_waiting',
        help: 'Requests to the order event feed held by this instance, waiting for an event (long polls)',
        registers: [this.registry],
        collect() {
          this.set(eventWaiters())
        },
      })
    }
  }

  /** `orders_<operation>_total`: the calls of `<operation>Order` by outcome. */
  private outcomes(operation: string): Counter<'outcome'> {
    return new Counter({ name: `orders_${operation}_total`, help: `${operation}Order calls by outcome`, labelNames: ['outcome'], registers: [this.registry] })
  }

  cancelled(outcome: CancelOutcome | 'error'): void {
    this.cancels.inc({ outcome })
  }

  placed(outcome: PlaceResult['outcome'] | 'error'): void {
    this.places.inc({ outcome })
  }

  shipped(outcome: ShipOutcome | 'error'): void {
    this.ships.inc({ outcome })
  }

  completed(outcome: CompleteOutcome | 'error'): void {
    this.completes.inc({ outcome })
  }

  updated(outcome: UpdateOutcome | 'error'): void {
    this.updates.inc({ outcome })
  }

  /** A delivery attempt of the webhook dispatcher. */
  delivered(result: { outcome: string; durationMs: number }): void {
    this.webhookDeliveries.inc({ outcome: result.outcome })
    this.webhookDurations.observe({ outcome: result.outcome }, result.durationMs / 1000)
  }

  /**
   * Each enabled endpoint's lag in events, read from the store when scraped (only where the
   * dispatcher runs): from positions, one indexed read at any backlog. A failed read leaves the
   * gauge empty rather than failing the scrape.
   */
  watchWebhookLag(lag: () => Promise<{ id: bigint; events: bigint }[]>): void {
    new Gauge({
      name: 'webhook_endpoint_lag_events',
      help: 'Feed positions after each enabled webhook endpoint\'s position: its events still to deliver, of any type',
      labelNames: ['endpoint'] as const,
      registers: [this.registry],
      async collect() {
        this.reset()
        try {
          // A float, as every Prometheus value is: exact up to 2^53 events of lag.
          for (const { id, events } of await lag()) this.set({ endpoint: id.toString() }, Number(events))
        } catch {
          // The database is unreachable: no series this scrape.
        }
      },
    })
  }

  register(app: FastifyInstance): void {
    // Each route counts its own requests, with its pattern (not the URL: ids must not explode the
    // label set) known in advance: reading it per request (request.routeOptions) builds an object.
    app.addHook('onRoute', (route) => {
      const hook = this.recorder(route.url)
      route.onResponse = route.onResponse === undefined ? [hook] : [route.onResponse, hook].flat()
    })
    // A request no route matched never reaches a route's hooks.
    const unmatched = this.recorder('unmatched')
    app.addHook('onResponse', (request, reply, done) => {
      if (request.is404) unmatched(request, reply, done)
      else done()
    })
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      return reply.type(this.registry.contentType).send(await this.registry.metrics())
    })
  }

  /** An onResponse hook that counts a request of this route, with its series looked up by method and status. */
  private recorder(route: string): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
    const byMethod = new Map<string, Map<number, Series>>()
    return (request, reply, done) => {
      const { method } = request
      const status = reply.statusCode
      let byStatus = byMethod.get(method)
      if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()))
      let series = byStatus.get(status)
      if (series === undefined) byStatus.set(status, (series = this.seriesOf(method, route, status)))
      series.uncounted++
      series.durations.observe(reply.elapsedTime / 1000)
      done()
    }
  }

  /** One series per label set, whichever route's hook (GET and HEAD, say) asks first. */
  private seriesOf(method: string, route: string, status: number): Series {
    const id = `${method} ${status} ${route}`
    let series = this.series.get(id)
    if (series === undefined) {
      const labels = { method, route, status }
      series = { requests: this.requests.labels(labels), durations: this.durations.labels(labels), uncounted: 0 }
      this.series.set(id, series)
    }
    return series
  }
}
