import { loadConfig } from '../../config.js'
import { unknownVariables } from '../../unknown-variables.js'
import { demoKeyPath } from '../../demo/demo-key-file.js'
import { DEMO_ORDERS, prepareDemo, type DemoPreparation } from '../../demo/prepare-demo.js'
import { PROGRAM, oneLine, sayNotice, type Command } from '../command.js'
import { databaseCreatedNotice, databaseToCreate } from '../new-database.js'
import { Progress } from '../progress.js'
import { seedProgress } from './seed.js'

export const serve: Command = {
  name: ['serve'],
  synopsis: 'serve [--demo]',
  summary: 'run the HTTP API',
  options: { demo: { type: 'boolean' } },
  logsWarnings: true,
  help: `Usage: ${PROGRAM} serve [--demo]

Runs the HTTP API until SIGTERM or SIGINT, then stops accepting connections, finishes the
requests in flight, closes the database and exits 0. Migrates the database first. Logs are JSON
lines on stdout; when stderr is a terminal, one line there also says the address and where the
API reference is. Configuration comes from the environment (PORT, default 8080; HOST, default
127.0.0.1; LOG_LEVEL; KEY_CACHE_TTL_MS; … — see the README); a bad value stops it at start with
a message naming the variable.

Options:
  --demo       for a first look: when the database has no orders, seed ${DEMO_ORDERS} demo orders
               and their pets; reuse the demo key kept beside the database while it is
               valid, else create one named "demo" and keep it (a SQLite database's key in
               DATABASE.demo-key, mode 0600; a PostgreSQL database's in ./data/); once
               listening, print the address, the key and a curl command to try it (what
               'npm start' runs)
  -h, --help   show this help

Examples:
  ${PROGRAM} serve
  PORT=3000 HOST=0.0.0.0 DATABASE_URL=postgres://petstore@db/petstore ${PROGRAM} serve
  ${PROGRAM} serve --demo`,
  async run({ values }, io) {
    const config = loadConfig(io.env)
    const unknown = unknownVariables(io.env)
    const { serve: runServer } = await import('../../server.js') // the HTTP stack, only when serving
    const toCreate = databaseToCreate(config.database)
    if (values.demo !== true) {
      await runServer(config, {
        unknownVariables: unknown,
        prepare: async () => sayNotice(io, databaseCreatedNotice(io.env, toCreate)),
        // For a person at a terminal, one line on stderr; the JSON log on stdout is for machines.
        onListening: (url) => {
          if (io.stderr.isTTY === true) sayNotice(io, `listening on ${apiBase(url)}; API reference: ${origin(url)}/docs`)
        },
      })
      return
    }
    // On the server's own store, migrated, before it listens: the database is opened once.
    let demo: DemoPreparation | undefined
    const keyFile = demoKeyPath(config.database)
    await runServer(config, {
      unknownVariables: unknown,
      prepare: async (store) => {
        sayNotice(io, databaseCreatedNotice(io.env, toCreate))
        const progress = new Progress(io.stderr)
        try {
          demo = await prepareDemo(store, keyFile, seedProgress(progress, DEMO_ORDERS))
        } finally {
          progress.clear()
        }
        if (demo.notSeeded !== undefined) sayNotice(io, `demo orders not seeded: ${oneLine(demo.notSeeded)}`)
        if (demo.notStored !== undefined) sayNotice(io, `the demo key could not be kept in ${keyFile}: ${oneLine(demo.notStored)}`)
      },
      onListening: (url) => {
        const { secret, created, seeded, notStored } = demo!
        const kept = notStored !== undefined ? 'new, not kept: the next start makes another' : `${created ? 'new, kept' : 'the same as the last start, kept'} in ${keyFile} and printed at each start`
        const base = apiBase(url)
        io.stdout.write(
          [
            '',
            `Petstore Orders (demo) is listening on ${base}`,
            seeded === undefined ? '  orders: the ones already in the database' : `  orders: ${seeded} demo orders seeded`,
            `  demo API key: ${secret}`,
            `  (${kept})`,
            `  API reference: ${origin(url)}/docs`,
            '',
            `  curl -H "Authorization: Bearer ${secret}" ${base}/store/orders`,
            '',
            '',
          ].join('\n'),
        )
      },
    })
  },
}

function origin(url: string): string {
  return url.replace(/\/+$/, '')
}

function apiBase(url: string): string {
  return `${origin(url)}/v1`
}
