import { resolve } from 'node:path'
import { CommandError, PROGRAM, UsageError, withStore, type Command } from '../command.js'

export const backup: Command = {
  name: ['backup'],
  synopsis: 'backup FILE',
  summary: 'copy the SQLite database to a new file, while the server keeps serving',
  positionals: [{ name: 'FILE', describe: 'the new file to write the copy to' }],
  help: `Usage: ${PROGRAM} backup FILE

Copies the SQLite database to FILE, a new file (mode 0600), while the server and other commands
keep reading and writing it: the copy is one consistent snapshot (SQLite's VACUUM INTO, compacted
as it is written), and a database in its own right (DATABASE_URL=sqlite:FILE serves it). An
existing FILE is refused before anything is copied, never overwritten; a copy that fails or is
interrupted (Ctrl-C, SIGTERM) leaves nothing, beside FILE either, and says why in one line. A
PostgreSQL database is backed up with PostgreSQL's own tools (pg_dump): this command refuses it.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} backup backups/petstore-$(date -u +%Y%m%dT%H%M%SZ).db
  docker exec petstore ${PROGRAM} backup /var/lib/petstore-orders/backup.db`,
  async run({ positionals }, io) {
    const given = positionals[0]!
    // An empty FILE would resolve to this folder, and `-` reads as standard output: neither is a new file.
    if (given === '' || given === '-') throw new UsageError(`FILE must name a new file, got ${JSON.stringify(given)}`)
    const file = resolve(given)
    // Ctrl-C or a stop signal: the copy's partial file is removed at once, and nothing is left.
    const stop = new AbortController()
    const interrupted = (signal: NodeJS.Signals): void => stop.abort(new CommandError(`backup interrupted by ${signal}: nothing was written`))
    process.once('SIGINT', interrupted).once('SIGTERM', interrupted)
    try {
      await withStore(io, (store) => store.backupTo(file, stop.signal), { migrate: false })
    } catch (error) {
      if (error instanceof CommandError) throw error
      if ((error as { code?: unknown }).code === 'EEXIST') throw new CommandError(`${file} exists: a backup never replaces a file; name a new one`)
      throw new CommandError(`cannot write ${file}: ${whyNot(error)}`, { cause: error })
    } finally {
      process.off('SIGINT', interrupted).off('SIGTERM', interrupted)
    }
    io.stderr.write(`${PROGRAM}: backed up the database to ${file}\n`)
  },
}

/** Why the copy could not be written, naming no file of its own (the partial one beside FILE). */
function whyNot(error: unknown): string {
  const code = (error as { code?: unknown }).code
  if (code === 'ENOENT') return 'its folder does not exist'
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied'
  if (code === 'EROFS') return 'its file system is read-only'
  if (code === 'ENOSPC' || code === 'SQLITE_FULL') return 'its disk is full'
  if (typeof code === 'string' && code.startsWith('SQLITE_IOERR')) return `writing it failed (${code})`
  throw error
}
