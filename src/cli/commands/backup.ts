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
existing FILE is refused, never overwritten; a copy that fails leaves nothing under FILE. A
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
    try {
      await withStore(io, (store) => store.backupTo(file), { migrate: false })
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'EEXIST') throw new CommandError(`${file} exists: a backup never replaces a file; name a new one`)
      if (code === 'ENOENT') throw new CommandError(`cannot write ${file}: its folder does not exist`)
      if (code === 'EACCES' || code === 'EPERM') throw new CommandError(`cannot write ${file}: permission denied`)
      throw error
    }
    io.stderr.write(`${PROGRAM}: backed up the database to ${file}\n`)
  },
}
