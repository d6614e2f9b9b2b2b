/**
 * A value now, or later. What a small request needs is usually in memory (a cached key, local rate
 * counters, a cached list) and answered at once; only a miss, Redis or the network needs a promise.
 * Chaining with `then` below keeps the common case free of promises and microtask turns, which are
 * a measurable share of a small request.
 */
export type MaybePromise<T> = T | Promise<T>

/** `next(value)` now if `value` is plain, or once its promise resolves. */
export function then<T, R>(value: MaybePromise<T>, next: (value: T) => MaybePromise<R>): MaybePromise<R> {
  return value instanceof Promise ? value.then(next) : next(value)
}
