/**
 * A value now, or later. The in-memory parts of a request's admission (cached keys, local rate
 * counters) answer at once; only a cache miss or Redis needs a promise. Chaining with `then` below
 * keeps the common case free of promises and microtask turns, which are a measurable share of a
 * small request.
 */
export type MaybePromise<T> = T | Promise<T>

/** `next(value)` now if `value` is plain, or once its promise resolves. */
export function then<T, R>(value: MaybePromise<T>, next: (value: T) => MaybePromise<R>): MaybePromise<R> {
  return value instanceof Promise ? value.then(next) : next(value)
}
