import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { OutageLog } from '../src/outage-log.js'
import { bearer, postgresForSuite } from './support/harness.js'
import { freePort, spawnServer, stopServer, type ServerProcess } from './support/server-process.js'
import { cli, assertOk } from './support/cli.js'
import { TcpRelay } from './support/tcp-relay.js'

describe('OutageLog', () => {
  function recorded(): { lines: string[]; log: OutageLog; clock: { now: number } } {
    const lines: string[] = []
    const clock = { now: 0 }
    const sink = { warn: (fields: object, message: string) => lines.push(`warn ${message} ${JSON.stringify(fields)}`), info: (fields: object, message: string) => lines.push(`info ${message} ${JSON.stringify(fields)}`) }
    return { lines, clock, log: new OutageLog(sink as never, { failing: 'down', answering: 'up' }, 60_000, () => clock.now) }
  }

  it('says a failure once, then at most once a minute with how many failed since, and the end once', () => {
    const { lines, log, clock } = recorded()
    log.succeeded() // nothing was said: nothing ends
    log.failed(new Error('refused'))
    for (let i = 0; i < 100; i++) log.failed(new Error('refused'))
    clock.now = 59_999
    log.failed(new Error('refused'))
    assert.deepEqual(lines, ['warn down {"reason":"refused","failures":1}'])
    clock.now = 60_000
    log.failed(new Error('timeout'))
    log.succeeded()
    log.succeeded()
    assert.deepEqual(lines, ['warn down {"reason":"refused","failures":1}', 'warn down {"reason":"timeout","failures":102}', 'info up {"failures":0}'])
  })

  it('says a dependency that flaps at most once a minute, not once per failure and success', () => {
    const { lines, log, clock } = recorded()
    for (let second = 0; second < 120; second++) {
      clock.now = second * 1000
      log.failed(new Error('busy'))
      log.succeeded()
    }
    assert.deepEqual(
      lines.map((line) => line.split(' ')[1]),
      ['down', 'up', 'down', 'up'],
    )
  })
})

describe('the log of a PostgreSQL outage under a running server', () => {
  const postgres = postgresForSuite()

  it('one warning for many failed requests, no stack per request, and one line once it answers again', async (t) => {
    if (postgres.skip !== undefined) return t.skip(postgres.skip)
    const relay = new TcpRelay(await freePort(), new URL(postgres.database.url))
    const url = relay.url
    await relay.up()
    const created = await cli(['keys', 'create', '--name', 'outage'], { DATABASE_URL: url })
    assertOk(created)
    const key = created.stdout.trim()
    let server: ServerProcess | undefined
    try {
      server = await spawnServer(url, { LOG_LEVEL: 'info', KEY_CACHE_TTL_MS: '0' })
      await relay.down()
      let failed = 0
      for (let i = 0; i < 30; i++) {
        const response = await fetch(`${server.origin}/v2/store/orders/1`, { headers: bearer(key) })
        await response.arrayBuffer()
        if (response.status === 503) failed++
      }
      assert.ok(failed >= 25, `${failed} of 30 requests were 503`)
      assert.equal((await fetch(`${server.origin}/readyz`)).status, 503)
      await relay.up()
      while ((await fetch(`${server.origin}/readyz`)).status !== 200) await sleep(100)
      await stopServer(server) // every line written before it exits
      const lines = server.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as { level: number; msg: string; reason?: string; err?: unknown })
      const outage = lines.filter((line) => line.msg === 'the database is unavailable; requests that need it get 503 until it answers')
      assert.equal(outage.length, 1, JSON.stringify(outage))
      assert.equal(outage[0]!.level, 40)
      assert.match(outage[0]!.reason!, /PostgreSQL at 127\.0\.0\.1:\d+ is unavailable/)
      assert.equal(lines.filter((line) => line.msg === 'the database answers again').length, 1)
      assert.deepEqual(lines.filter((line) => line.msg === 'request failed' || line.err !== undefined), [], 'no stack per request')
      // Each request still has its own line, with its status.
      assert.ok(lines.filter((line) => line.msg === 'request').length >= 30)
    } finally {
      if (server !== undefined) await stopServer(server)
      await relay.down()
    }
  })
})
