import { loadConfig } from '../../config.js'
import { ImportConflictError } from '../../store/store.js'
import { PROGRAM, oneLine, withStore, type Command, type Io } from '../command.js'
import { Progress } from '../progress.js'
import { createKey } from './keys.js'
import { seedDemoData } from './seed.js'

export const DEMO_ORDERS = 1000

/** For `serve --demo`: demo data when the store has no orders, and a fresh key named "demo". */
async function prepareDemo(io: Io): Promise<{ secret: string; seeded: number | undefined }> {
  return withStore(io, async (store) => {
    let empty = true
    for await (const batch of store.streamOrders(1)) {
      empty = batch.length === 0
      break
    }
    let seeded: number | undefined
    if (empty) {
      const progress = new Progress(io.stderr)
      try {
        seeded = (await seedDemoData(store, { orders: DEMO_ORDERS, seed: 1, firstOrderId: 1n }, progress)).orders
      } catch (error) {
        // Every order is cancelled, and the demo ids are among them: serve what there is.
        if (!(error instanceof ImportConflictError)) throw error
        io.stderr.write(`${PROGRAM}: demo orders not seeded: ${oneLine(error.message)}\n`)
      } finally {
        progress.clear()
      }
    }
    const { secret } = await createKey(store, { name: 'demo' })
    return { secret, seeded }
  })
}

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
               and their pets; create a new API key named "demo"; once listening, print the
               address, the key and a curl command to try it (what 'npm start' runs)
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
    const { secret, seeded } = await prepareDemo(io)
    await runServer(config, {
      onListening: (url) => {
        const base = `${url.replace(/\/+$/, '')}/v1`
        io.stdout.write(
          [
            '',
            `Petstore Orders (demo) is listening on ${base}`,
            seeded === undefined ? '  orders: the ones already in the database' : `  orders: ${seeded} demo orders seeded`,
            `  demo API key: ${secret}`,
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
