import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { parseDateTime } from '../src/domain/date-time.js'
import { assertOk, cli } from './support/cli.js'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { getPage } from './support/v2.js'

describe('parseDateTime: the one reading of an RFC 3339 date-time', () => {
  it('gives the instant in UTC, to the millisecond, whatever the offset', () => {
    assert.equal(parseDateTime('2026-11-25T10:00:00Z'), '2026-11-25T10:00:00.000Z')
    assert.equal(parseDateTime('2026-11-25t11:30:00.5+01:30'), '2026-11-25T10:00:00.500Z')
    assert.equal(parseDateTime('2026-11-25T00:00:00-00:01'), '2026-11-25T00:01:00.000Z')
  })

  it('rounds a fraction finer than a millisecond up to the next millisecond, carrying as far as it goes', () => {
    assert.equal(parseDateTime('2026-11-25T10:00:00.0001Z'), '2026-11-25T10:00:00.001Z')
    assert.equal(parseDateTime('2026-11-25T10:00:00.123000000000Z'), '2026-11-25T10:00:00.123Z') // zeros are exact
    assert.equal(parseDateTime('2026-11-25T10:00:00.1230000000001Z'), '2026-11-25T10:00:00.124Z')
    assert.equal(parseDateTime('2026-12-31T23:59:59.9999Z'), '2027-01-01T00:00:00.000Z')
    assert.equal(parseDateTime('9999-12-31T23:59:59.9999Z'), undefined) // past year 9999
  })

  it('reads years 0–99 as written, and holds instants to years 0001–9999 in UTC', () => {
    assert.equal(parseDateTime('0099-06-01T00:00:00Z'), '0099-06-01T00:00:00.000Z')
    assert.equal(parseDateTime('0001-01-01T00:00:00Z'), '0001-01-01T00:00:00.000Z')
    assert.equal(parseDateTime('0004-02-29T00:00:00Z'), '0004-02-29T00:00:00.000Z') // a leap year, not 1904's
    assert.equal(parseDateTime('0000-12-31T23:00:00-01:00'), '0001-01-01T00:00:00.000Z')
    assert.equal(parseDateTime('0000-06-01T00:00:00Z'), undefined)
    assert.equal(parseDateTime('0001-01-01T00:00:00+01:00'), undefined)
    assert.equal(parseDateTime('9999-12-31T23:30:00-01:00'), undefined)
  })

  it('refuses what is not an RFC 3339 date-time with a timezone', () => {
    for (const bad of ['2026-11-25', '2026-11-25T10:00:00', '2026-11-25 10:00:00Z', '2026-11-25T10:00Z', '2026-11-25T10:00:00.Z', '2025-02-29T00:00:00Z', '2026-04-31T00:00:00Z', '2026-13-01T00:00:00Z', '2026-11-25T24:00:00Z', '2026-11-25T23:59:60Z', '2026-11-25T10:00:00+24:00', '2026-11-25T10:00:00+01:60', '2026-11-25T10:00:00 01:00', '+02026-11-25T10:00:00Z']) {
      assert.equal(parseDateTime(bad), undefined, bad)
    }
  })
})

// The same text means the same instant to an import and to a filter: an order imported with a ship
// date is on the `from` side of a filter given that very text, whatever its fraction and year.
forEachStore('a date-time imported and the same text as a v2 filter', (kind) => {
  let server: TestServer
  let key: string
  let scratch: string
  const ship = { sub: '2026-11-25T10:00:00.0004+01:00', early: '0099-06-01T00:00:00.0005Z' }

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey()
    scratch = mkdtempSync(join(tmpdir(), 'date-time-test-'))
    const file = join(scratch, 'orders.ndjson')
    writeFileSync(file, `{"id": 1, "shipDate": "${ship.sub}"}\n{"id": 2, "shipDate": "${ship.early}"}\n{"id": 3, "shipDate": "2026-11-25T09:00:00.002Z"}\n`)
    assertOk(await cli(['orders', 'import', file], { DATABASE_URL: server.database.url }))
  })

  after(() => rmSync(scratch, { recursive: true, force: true }))

  const ids = async (query: Record<string, string>): Promise<string[]> => (await getPage(server, key, new URLSearchParams(query).toString())).data.map((order) => order.id)

  it('stores what the filter reads: a sub-millisecond fraction rounded up', async () => {
    assert.equal((await getPage(server, key, '')).data.find((order) => order.id === '1')?.shipDate, '2026-11-25T09:00:00.001Z')
    assert.deepEqual(await ids({ shipDateFrom: ship.sub, shipDateTo: '2026-11-25T09:00:00.002Z' }), ['1'])
    assert.deepEqual(await ids({ shipDateFrom: '2026-11-25T09:00:00Z', shipDateTo: ship.sub }), [])
  })

  it('stores what the filter reads: years 0–99 as written', async () => {
    assert.equal((await getPage(server, key, '')).data.find((order) => order.id === '2')?.shipDate, '0099-06-01T00:00:00.001Z')
    assert.deepEqual(await ids({ shipDateFrom: ship.early, shipDateTo: '0100-01-01T00:00:00Z' }), ['2'])
    assert.deepEqual(await ids({ shipDateFrom: '0001-01-01T00:00:00Z', shipDateTo: ship.early }), [])
  })

  it('refuses a filter an import would refuse, with 400 invalid_parameter', async () => {
    for (const text of ['0000-06-01T00:00:00Z', '2026-11-25T23:59:60Z']) {
      const response = await fetch(`${server.origin}/v2/store/orders?${new URLSearchParams({ shipDateFrom: text })}`, { headers: bearer(key) })
      await expectError(response, 400, 'invalid_parameter')
    }
  })
})
