import { loadConfig } from '../../config.js'
import { DEMO_ORDERS, prepareDemo, type DemoPreparation } from '../../domain/prepare-demo.js'
import { PROGRAM, oneLine, type Command } from '../command.js'
import { Progress } from '../progress.js'
import { seedProgress } from './seed.js'

export const serve: Command = {
  name: ['serve'],
  synopsis: 'serve [--demo]',
  summary: 'run the HTTP API',
  options: { demo: { type: 'boolean' } },
  positionals: [],
  usesDatabase: true,
  help: `Usage: ${PROGRAM} serve [--demo]

Runs the HTTP API until SIGTERM or SIGINT, then stops accepting connections, finishes the
requests in flight, closes the database and exits 0. Migrates the database first. Logs are JSON
lines on stdout. Configuration comes from the environment (PORT, default 8080; HOST, default
127.0.0.1; LOG_LEVEL; KEY_CACHE_TTL_MS; … — see the README); a bad value stops it at start with
a message naming the variable.

Options:
  --demo       for a first look: when the database has no orders, seed ${DEMO_ORDERS} demo orders
               and their pets; revoke the keys named "demo" and create a new one; once
               listening, print the address, the key and a curl command to try it (what
               'npm start' runs)
  -h, --help   show this help

Examples:
  ${PROGRAM} serve
  PORT=3000 HOST=0.0.0.0 DATABASE_URL=postgres://petstore@db/petstore ${PROGRAM} serve
  ${PROGRAM} serve --demo`,
  async run({ values }, io) {
    const config = loadConfig(io.env)
    const { serve: runServer } = await import('../../server.js') // the HTTP stack, only when serving
    if (values.demo !== true) {
      await runServer(config)
      return
    }
    // On the server's own store, migrated, before it listens: the database is opened once.
    let demo: DemoPreparation | undefined
    await runServer(config, {
      prepare: async (store) => {
        const progress = new Progress(io.stderr)
        try {
          demo = await prepareDemo(store, seedProgress(progress, DEMO_ORDERS))
        } finally {
          progress.clear()
        }
        if (demo.notSeeded !== undefined) io.stderr.write(`${PROGRAM}: demo orders not seeded: ${oneLine(demo.notSeeded)}\n`)
      },
      onListening: (url) => {
        const { secret, seeded, revoked } = demo!
        const base = `${url.replace(/\/+$/, '')}/v1`
        io.stdout.write(
          [
            '',
            `Petstore Orders (demo) is listening on ${base}`,
            seeded === undefined ? '  orders: the ones already in the database' : `  orders: ${seeded} demo orders seeded`,
            `  demo API key: ${secret}`,
            ...(revoked > 0 ? [`  (the earlier demo key${revoked > 1 ? 's are' : ' is'} revoked: only this one works)`] : []),
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
