import { context, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api'
import { activeSpan } from '../store/batch-span.js'
import type { Store } from '../store/store.js'

const tracer = trace.getTracer('petstore-orders')
const REPOSITORIES = ['orders', 'apiKeys', 'pets', 'events', 'webhooks'] as const
/**
 * The data version a list and the event feed check before they read: one small row read once per
 * turn (PostgreSQL's is kept in memory by notifications, and its trace shows no statement for it).
 * A span would cost the SDK several times the read, in every sampled list, and say nothing the
 * request's span does not.
 */
const UNTRACED = new Set(['orders.dataVersion'])

/**
 * The store, with a CLIENT span per operation of its repositories (`orders.cancel`, with
 * `db.system` and `db.operation.name`; never an argument or a row) when the call is made inside a
 * recorded span: a request's, a delivery's. For the embedded SQLite store, whose calls no library
 * traces (PostgreSQL's statements are traced by instrumentation-pg). Work outside a trace (the
 * dispatcher's lease passes, pruning), or in one not sampled, makes no span: it would not be
 * recorded either; nor does the data version (UNTRACED). An operation that returns an async
 * iterable (the v1 list) ends its span when the iteration does.
 */
export function traceStoreOperations(store: Store, system: string): Store {
  // Plain objects over the store and its repositories, their methods wrapped once: a call costs a
  // property read and the active-span test, not a Proxy trap.
  const traced = Object.create(store) as Record<string, unknown>
  for (const name of REPOSITORIES) traced[name] = traceRepository(store[name], name, system)
  for (const [property, method] of methodsOf(store)) traced[property] = method.bind(store)
  return traced as unknown as Store
}

function traceRepository<R extends object>(repository: R, name: string, system: string): R {
  const traced = Object.create(repository) as Record<string, unknown>
  for (const [property, method] of methodsOf(repository)) {
    const operation = `${name}.${property}`
    if (UNTRACED.has(operation)) {
      traced[property] = method.bind(repository)
      continue
    }
    traced[property] = (...args: unknown[]): unknown => {
      if (activeSpan() === undefined) return method.apply(repository, args)
      const span = tracer.startSpan(operation, {
        kind: SpanKind.CLIENT,
        attributes: { 'db.system': system, 'db.system.name': system, 'db.operation.name': operation },
      })
      return settle(span, () => context.with(trace.setSpan(context.active(), span), () => method.apply(repository, args)))
    }
  }
  return traced as R
}

/** The methods an object has, its own and its classes', by name (the nearest of each name). */
function methodsOf(object: object): Map<string, (...args: unknown[]) => unknown> {
  const methods = new Map<string, (...args: unknown[]) => unknown>()
  for (let level: object | null = object; level !== null && level !== Object.prototype; level = Object.getPrototypeOf(level) as object | null) {
    for (const property of Object.getOwnPropertyNames(level)) {
      const value = Object.getOwnPropertyDescriptor(level, property)?.value as unknown
      if (property !== 'constructor' && typeof value === 'function' && !methods.has(property)) methods.set(property, value as (...args: unknown[]) => unknown)
    }
  }
  return methods
}

function settle(span: Span, run: () => unknown): unknown {
  const fail = (error: unknown): never => {
    span.setAttribute('error.type', error instanceof Error ? error.name : 'error').setStatus({ code: SpanStatusCode.ERROR })
    span.end()
    throw error
  }
  let result: unknown
  try {
    result = run()
  } catch (error) {
    fail(error)
  }
  if (result instanceof Promise) {
    return result.then((value: unknown) => {
      span.end()
      return value
    }, fail)
  }
  if (result !== null && typeof result === 'object' && Symbol.asyncIterator in result) return iterated(span, result as AsyncIterable<unknown>, fail)
  span.end()
  return result
}

function iterated<T>(span: Span, iterable: AsyncIterable<T>, fail: (error: unknown) => never): AsyncIterable<T> {
  let ended = false
  const end = (): void => {
    if (!ended) span.end()
    ended = true
  }
  return {
    [Symbol.asyncIterator]() {
      const iterator = iterable[Symbol.asyncIterator]()
      return {
        next: () =>
          iterator.next().then((step) => {
            if (step.done === true) end()
            return step
          }, fail),
        return: async (value?: unknown) => {
          end()
          return (await iterator.return?.(value)) ?? { done: true, value: undefined }
        },
      }
    },
  }
}
