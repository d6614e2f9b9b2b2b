import { OutageLog } from '../../outage-log.js'
import { RETRY_EVERY_MS, untilAvailable } from '../../store/until-available.js'
import { PROGRAM, oneLine, sayNotice, withStore, type Command } from '../command.js'

export const migrate: Command = {
  name: ['migrate'],
  synopsis: 'migrate',
  summary: 'apply pending database migrations',
  help: `Usage: ${PROGRAM} migrate

Applies the database migrations this version has and the database lacks, and prints them. Every
other command (and the server) does this by itself; run it on its own to migrate ahead of a
deployment. Safe to run any number of times, from any number of processes at once: one migrates,
the others wait for it (on SQLite, saying so on stderr while another process holds the database's
write lock), then find the schema up to date. A database whose schema is newer than this version
is refused, untouched.

Options:
  -h, --help   show this help

Examples:
  ${PROGRAM} migrate
  DATABASE_URL=postgres://petstore@db.internal/petstore ${PROGRAM} migrate`,
  async run(_input, io) {
    // PostgreSQL's migrations wait on their own lock; SQLite's write lock is waited for here.
    const waits = new OutageLog(
      { warn: ({ reason }, message) => sayNotice(io, `waiting for the database: ${oneLine(reason)}; ${message}`), info: () => undefined },
      { failing: `trying again every ${RETRY_EVERY_MS / 1000} s (Ctrl-C stops)`, answering: '' },
    )
    const applied = await withStore(io, (store) => (store.kind === 'sqlite' ? untilAvailable(() => store.migrate(), waits) : store.migrate()), {
      migrate: false,
      createDatabase: true,
    })
    if (applied.length === 0) io.stdout.write('the database schema is up to date\n')
    for (const version of applied) io.stdout.write(`applied migration ${version}\n`)
  },
}
