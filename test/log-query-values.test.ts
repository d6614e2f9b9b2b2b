import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { generateApiKey, SCOPES } from '../src/domain/api-keys.js'
import { withoutQueryValues } from '../src/log-redaction.js'
import { openStore } from '../src/store/open-store.js'
import { rawRequest } from './support/raw-http.js'
import { bearer } from './support/harness.js'
import { spawnServer, type ServerProcess } from './support/server-process.js'

// A query string's values never reach a log line: a real `serve` process, every level logged, asked
// with an API key in the query of every kind of request that logs its URL; its stdout searched.
describe('query string values in the logs', () => {
  let dir: string
  let server: ServerProcess
  let key: string
  let output: string
  let keyAsName: string

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-log-query-'))
    const database = `sqlite:${join(dir, 'petstore.db')}`
    const store = await openStore({ kind: 'sqlite', path: join(dir, 'petstore.db') })
    try {
      await store.migrate()
      const created = generateApiKey()
      await store.apiKeys.create({ name: 'logs', hash: created.hash, displayPrefix: created.displayPrefix, scopes: [...SCOPES], expiresAt: null })
      key = created.secret
    } finally {
      await store.close()
    }
    server = await spawnServer(database, { LOG_LEVEL: 'trace' })
    const get = (path: string, headers: Record<string, string> = {}) => fetch(`${server.origin}${path}`, { headers }).then((response) => response.arrayBuffer())
    await get(`/?k=${key}`) // 404
    await get(`/v1/store/orders?k=${key}`, bearer(key)) // v1 takes no query: answered all the same
    await get(`/v2/store/orders?status=pending&cursor=${key}`, bearer(key)) // 400 invalid_cursor
    // A key without a name: 400 invalid_parameter, which does not repeat it either.
    keyAsName = await (await fetch(`${server.origin}/v2/store/orders?${key}`, { headers: bearer(key) })).text()
    await get(`/v1/%E0%A4%A?k=${key}`) // bad percent-encoding: Fastify's message quotes the URL
    await get(`/v1/store/orders?k=${key}&pad=${'x'.repeat(9000)}`, bearer(key)) // 414
    // Malformed HTTP after a request line with the key in its query.
    await rawRequest(server.origin, `GET /v1/store/orders?k=${key} HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n`)
    server.child.kill('SIGTERM') // every line written before it exits
    await server.exited
    output = server.output()
  })

  after(() => rmSync(dir, { recursive: true, force: true }))

  it('holds the key in no line, at any level', () => {
    const secret = key.slice(4) // what follows pso_
    const holding = output.split('\n').filter((line) => line.includes(secret))
    assert.deepEqual(holding, [])
  })

  it('answers a key sent as a parameter name with where a key goes, never repeating it', () => {
    const body = JSON.parse(keyAsName) as { code: string; message: string }
    assert.equal(body.code, 'invalid_parameter')
    assert.match(body.message, /Authorization: Bearer <API_KEY>/)
    assert.ok(!keyAsName.includes(key.slice(4)), keyAsName)
  })

  it('keeps the names of the parameters, their values redacted, in the access lines and the refusals', () => {
    const lines = output.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
    const urls = lines.filter((line) => line.msg === 'request').map((line) => line.url)
    assert.ok(urls.includes('/?k=[redacted]'), JSON.stringify(urls))
    assert.ok(urls.includes('/v2/store/orders?status=[redacted]&cursor=[redacted]'), JSON.stringify(urls))
    assert.ok(urls.includes('/v2/store/orders?[redacted]'), JSON.stringify(urls))
    const reasons = lines.filter((line) => line.msg === 'request refused').map((line) => String(line.reason))
    assert.ok(reasons.some((reason) => reason.startsWith("'/v1/%E0%A4%A?k=[redacted]' is")), JSON.stringify(reasons))
    assert.ok(reasons.some((reason) => reason.startsWith('An API key was sent in the query string')), JSON.stringify(reasons))
  })
})

describe('withoutQueryValues', () => {
  it('redacts every value of every query in the text, and leaves the rest as it is', () => {
    assert.equal(withoutQueryValues('/v2/store/orders'), '/v2/store/orders')
    assert.equal(withoutQueryValues('/v2/store/orders?status=pending&cursor=abc'), '/v2/store/orders?status=[redacted]&cursor=[redacted]')
    assert.equal(withoutQueryValues('/x?a=&b&&c=1=2'), '/x?a=[redacted]&[redacted]&&c=[redacted]')
    assert.equal(withoutQueryValues('/x?a=1#frag'), '/x?a=[redacted]#frag')
    assert.equal(withoutQueryValues("'/a?k=1' and \"/b?j=2\" failed"), "'/a?k=[redacted]' and \"/b?j=[redacted]\" failed")
    assert.equal(withoutQueryValues('did you mean http/json?'), 'did you mean http/json?')
    assert.equal(withoutQueryValues('really ? yes'), 'really ? yes')
  })
})
