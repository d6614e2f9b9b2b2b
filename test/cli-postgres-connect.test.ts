import assert from 'node:assert/strict'
import { createServer, connect, type Server, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { assertOk, cli } from './support/cli.js'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './support/postgres.js'

// A command waits for its PostgreSQL connection longer than the server does (src/cli/command.ts): a
// loaded database server can take seconds to start a backend, and a command is run once, by hand.
// Here every connection reaches PostgreSQL through a proxy that holds it for 3 s first, past the
// server's 2 s.

const HELD_MS = 3_000
const skip = await postgresSkipReason()

describe('a command on a PostgreSQL slow to answer a connection', { skip }, () => {
  let db: TestDatabase
  let proxy: Server
  const sockets = new Set<Socket>()
  let held = 0

  before(async () => {
    db = await createTestDatabase()
    const target = new URL(db.url)
    proxy = createServer((client) => {
      held++
      sockets.add(client)
      client.on('error', () => {})
      setTimeout(() => {
        const upstream = connect(Number(target.port || 5432), target.hostname)
        sockets.add(upstream)
        upstream.on('error', () => client.destroy())
        client.on('close', () => upstream.destroy())
        upstream.on('close', () => client.destroy())
        client.pipe(upstream).pipe(client)
      }, HELD_MS)
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  })

  after(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => proxy?.close(resolve))
    await db?.drop()
  })

  it(`is served: each connection answered after ${HELD_MS / 1000} s`, async () => {
    const url = new URL(db.url)
    url.hostname = '127.0.0.1'
    url.port = String((proxy.address() as { port: number }).port)
    const started = performance.now()
    const result = await cli(['keys', 'list'], { DATABASE_URL: url.toString() })
    assertOk(result)
    assert.ok(held >= 1, 'the command connected through the proxy')
    assert.ok(performance.now() - started >= HELD_MS, 'its connection was held')
  })
})
