/** An error as it crosses from a worker thread (the writer's, a backup's): an Error does not cross whole. */
export interface ThreadError {
  name: string
  message: string
  /** SQLite's code (`SQLITE_BUSY`), which classify() and the CLI read. */
  code: string | undefined
}

/** What of `error` a thread posts: its name, message and code. */
export function toThreadError(error: unknown): ThreadError {
  const { name, message, code } = error as { name?: unknown; message?: unknown; code?: unknown }
  return { name: String(name), message: String(message), code: typeof code === 'string' ? code : undefined }
}

/** The Error a posted ThreadError stands for, on the thread that receives it. */
export function fromThreadError({ name, message, code }: ThreadError): Error {
  return Object.assign(new Error(message), { name, code })
}
