import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { assertOk, assertOneLineError, cli } from './support/cli.js'
import { freePort, spawnServer, type ServerProcess } from './support/server-process.js'

// `petstore-orders healthcheck`: what the container image's HEALTHCHECK runs, so the image needs no
// curl. It asks the server that the same environment (HOST, PORT) describes.

const dir = mkdtempSync(join(tmpdir(), 'petstore-healthcheck-'))
after(() => rmSync(dir, { recursive: true, force: true }))

describe('healthcheck against a running server', () => {
  let server: ServerProcess
  let port: string
  before(async () => {
    server = await spawnServer(`sqlite:${join(dir, 'orders.db')}`)
    port = new URL(server.origin).port
  })
  after(async () => {
    server.child.kill('SIGTERM')
    await server.exited
  })

  it('exits 0 when /healthz answers 200, and with --ready when /readyz does', async () => {
    const live = await cli(['healthcheck'], { PORT: port })
    assertOk(live)
    assert.equal(live.stdout, `http://127.0.0.1:${port}/healthz: ok\n`)
    const ready = await cli(['healthcheck', '--ready'], { PORT: port })
    assertOk(ready)
    assert.equal(ready.stdout, `http://127.0.0.1:${port}/readyz: ok\n`)
  })

  it('asks the loopback address when HOST is every interface (0.0.0.0), as in the container image', async () => {
    assertOk(await cli(['healthcheck'], { PORT: port, HOST: '0.0.0.0' }))
  })
})

describe('healthcheck when nothing healthy answers', () => {
  it('exits 1 with one line naming the URL when nothing listens on the port', async () => {
    const port = await freePort()
    assertOneLineError(await cli(['healthcheck'], { PORT: String(port) }), 1, new RegExp(`^petstore-orders: http://127\\.0\\.0\\.1:${port}/healthz: ECONNREFUSED$`))
  })

  it('exits 1 naming the status when the server answers anything but 200 (a 503 from /readyz)', async () => {
    const port = await freePort()
    const unready = createServer((_request, response) => response.writeHead(503).end('{"status":"unavailable"}'))
    await new Promise<void>((resolve) => unready.listen(port, '127.0.0.1', resolve))
    try {
      assertOneLineError(await cli(['healthcheck', '--ready'], { PORT: String(port) }), 1, /\/readyz answered 503$/)
    } finally {
      unready.close()
    }
  })

  it('with --wait, asks again until the answer is 200: a server still starting (503 twice) is waited for', async () => {
    const port = await freePort()
    let asked = 0
    const starting = createServer((_request, response) => (++asked <= 2 ? response.writeHead(503).end() : response.writeHead(200).end('{"status":"ok"}')))
    await new Promise<void>((resolve) => starting.listen(port, '127.0.0.1', resolve))
    try {
      const result = await cli(['healthcheck', '--ready', '--wait', '60'], { PORT: String(port) })
      assertOk(result)
      assert.equal(result.stdout, `http://127.0.0.1:${port}/readyz: ok\n`)
      assert.equal(asked, 3)
    } finally {
      starting.close()
    }
  })

  it('with --wait, gives up once the seconds have passed, naming the last problem', async () => {
    const port = await freePort()
    assertOneLineError(await cli(['healthcheck', '--wait', '1'], { PORT: String(port) }), 1, /ECONNREFUSED \(still, after 1 s\)$/)
  })

  it('refuses a --wait that is not 1 to 600 seconds', async () => {
    for (const wait of ['0', '601', '1.5', 'soon']) {
      assertOneLineError(await cli(['healthcheck', '--wait', wait], {}), 2, /--wait must be a whole number of seconds from 1 to 600/)
    }
  })

  it('refuses PORT=0, whose port only the server knows', async () => {
    assertOneLineError(await cli(['healthcheck'], { PORT: '0' }), 1, /PORT is 0/)
  })
})
