import { constants, createReadStream, type ReadStream } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import { ConfigError, loadDatabaseConfig } from '../../config.js'
import { ImportFileError, locateOrder, type ImportSource } from '../import-records.js'
import { fileProblem } from '../../file-problem.js'
import { ImportConflictError, type Store } from '../../store/store.js'
import { CommandError, oneLine, PROGRAM, withStore, type Io } from '../command.js'
import { formatCount, percent, Progress } from '../progress.js'

/**
 * Refuses a FILE that cannot be read before anything else happens (the database is not even opened).
 * A FILE that is not a regular file (a pipe, a FIFO, `/dev/stdin`) has no size and is read once.
 */
async function checkReadableFile(file: string): Promise<{ size: number; regular: boolean }> {
  try {
    const info = await stat(file)
    if (info.isDirectory()) throw new CommandError(`cannot read ${file}: it is a directory`)
    await access(file, constants.R_OK)
    return info.isFile() ? { size: info.size, regular: true } : { size: 0, regular: false }
  } catch (error) {
    if (error instanceof CommandError) throw error
    throw new CommandError(`cannot read ${file}: ${fileProblem(error)}`)
  }
}

/**
 * `orders import` and `pets import`: streams FILE through `read` into `write`, one transaction,
 * with a progress line on a terminal. Any failure leaves the database as it was.
 */
export async function importFile<T>(
  io: Io,
  file: string,
  what: 'orders' | 'pets',
  read: (source: ImportSource) => AsyncIterable<T>,
  write: (store: Store, records: AsyncIterable<T>, onProgress: (count: number) => void) => Promise<number>,
): Promise<void> {
  loadDatabaseConfig(io.env) // a bad DATABASE_URL is reported as such, before the file is read
  const { size, regular } = await checkReadableFile(file)
  let current: ReadStream | undefined
  const source: ImportSource = { open: () => (current = createReadStream(file)), rereadable: regular }
  const progress = new Progress(io.stderr)
  const show = (count: number): void => {
    const share = percent(current?.bytesRead ?? 0, size)
    progress.update(`importing ${what} from ${file}: ${share === '' ? '' : `${share} `}${formatCount(count)} records`)
  }
  let recordsRead = 0
  async function* counted(): AsyncGenerator<T> {
    for await (const record of read(source)) {
      recordsRead++
      yield record
    }
    progress.update(`importing ${what} from ${file}: ${formatCount(recordsRead)} records read, committing…`, true)
  }
  progress.update(`importing ${what} from ${file}…`, true)
  let count: number
  let unchanged = false
  try {
    count = await withStore(io, async (store) => {
      // Orders bump the data version whenever an import writes one: the same version after means
      // none was written (another writer's change in between only loses the remark).
      const before = what === 'orders' ? await store.orders.dataVersion() : undefined
      const written = await write(store, counted(), show)
      unchanged = before !== undefined && (await store.orders.dataVersion()) === before
      return written
    }, { createDatabase: true })
  } catch (error) {
    progress.clear()
    if (error instanceof ConfigError) throw error
    if (error instanceof ImportFileError || error instanceof ImportConflictError) {
      // The store names the order; the file's reader names where it is (a second pass, only now).
      const orderId = error instanceof ImportConflictError ? error.orderId : undefined
      const position = orderId === undefined ? undefined : await locateOrder(source, orderId).catch(() => undefined)
      throw new CommandError(`${file}: ${position === undefined ? '' : `${position}: `}${oneLine(error.message)}; nothing was imported`)
    }
    throw new CommandError(`${oneLine((error as Error).message)}; nothing was imported`, { cause: error })
  }
  progress.clear()
  const records = `${count} ${count === 1 ? what.slice(0, -1) : what}`
  if (unchanged && count > 0) io.stdout.write(`imported ${records} from ${file}: all unchanged, the database already held them as they are\n`)
  else io.stdout.write(`imported ${records} from ${file}\n`)
  // Not an error (exit 0): an export with nothing new in it is a normal file. But an empty file
  // is also what a wrong path or a failed export leaves behind, so it is said.
  if (recordsRead === 0) io.stderr.write(`${PROGRAM}: warning: ${file} holds no ${what} (it is empty, blank, or an empty array)\n`)
}
