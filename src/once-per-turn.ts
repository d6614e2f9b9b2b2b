import { setImmediate as nextTurn } from 'node:timers/promises'

/**
 * `read`, run in the check phase of the current turn of the event loop, once, however many callers
 * that turn brings: they all get its result. A caller after the read belongs to the next turn. So the
 * requests read in one turn share one read (a timer each was a measurable share of a small request),
 * and are answered together, after all of them were read.
 */
export function oncePerTurn<T>(read: () => T): () => Promise<T> {
  let turn: Promise<T> | undefined
  return () =>
    (turn ??= nextTurn().then(() => {
      turn = undefined
      return read()
    }))
}
