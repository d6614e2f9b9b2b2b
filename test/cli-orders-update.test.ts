import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { isLosslessNumber, parse } from 'lossless-json'
import type { OrderV2Record } from '../src/domain/orders.js'
import { openStore } from '../src/store/open-store.js'
import type { Store } from '../src/store/store.js'
import { assertOk, assertOneLineError, cli } from './support/cli.js'
import { createDatabase, forEachStore, order, records, type TestDatabaseHandle } from './support/harness.js'

const MAX = 9223372036854775807n
const BEYOND_2_53 = 9007199254740993n // 2^53 + 1: a JS number cannot hold it

/** A feed event as the store keeps it, its integers as text (exact). */
interface FeedEvent {
  type: string
  order: Record<string, unknown>
  previous?: Record<string, unknown>
}

/** Lossless numbers as their text, all the way down. */
function exact(value: unknown): unknown {
  if (isLosslessNumber(value)) return value.value
  if (Array.isArray(value)) return value.map(exact)
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, exact(v)]))
  return value
}

forEachStore('petstore-orders orders update', (kind) => {
  let database: TestDatabaseHandle
  let store: Store
  let env: Record<string, string>

  before(async () => {
    database = await createDatabase(kind)
    store = await openStore(database.config)
    await store.migrate()
    env = { DATABASE_URL: database.url }
    await store.orders.import(records([
      order({ id: 1n, petId: 7n, quantity: 2, shipDate: '2026-12-01T10:00:00.000Z' }),
      order({ id: 2n, petId: 7n, quantity: 1, status: 'shipped' }),
      order({ id: 3n, petId: 7n, quantity: 1, status: 'cancelled' }),
      order({ id: 4n, petId: 8n, quantity: 4, shipDate: '2026-12-02T10:00:00.000Z' }),
      order({ id: 5n, quantity: 1 }),
      order({ id: MAX, petId: 1n, quantity: 1 }),
    ]))
  })
  after(async () => {
    await store?.close()
    await database?.dispose()
  })

  async function find(id: bigint): Promise<OrderV2Record> {
    const found = await store.orders.find(id)
    assert.ok(found !== undefined, `order ${id}`)
    return found
  }

  /** The events of one order in the feed, in order. */
  async function eventsOf(id: bigint): Promise<FeedEvent[]> {
    const page = await store.events.read(undefined, 10_000)
    const all = exact(parse(page.json.toString())) as FeedEvent[]
    return all.filter((event) => event.order.id === String(id))
  }

  it('changes pet, quantity, ship date and metadata through the store: one line of what changed and the version, one order.updated with previous', async () => {
    const result = await cli([
      'orders', 'update', '1',
      '--quantity', '3',
      '--ship-date', '2026-12-24T09:30:00+01:00',
      '--pet-id', String(BEYOND_2_53),
      '--meta', 'customer=c-1042',
      '--meta', 'note=gift wrap, a=b',
    ], env)
    assertOk(result)
    assert.equal(result.stderr, '')
    assert.equal(
      result.stdout,
      `order 1 updated to version 2: petId 7 -> ${BEYOND_2_53}, quantity 2 -> 3, shipDate 2026-12-01T10:00:00.000Z -> 2026-12-24T08:30:00.000Z, metadata customer set, metadata note set\n`,
    )
    const one = await find(1n)
    assert.deepEqual(
      [one.petId, one.quantity, one.shipDate, one.metadata, one.version],
      [BEYOND_2_53, 3, '2026-12-24T08:30:00.000Z', { customer: 'c-1042', note: 'gift wrap, a=b' }, 2],
      'petId exact past 2^53; a value is everything after the first "="',
    )
    const events = await eventsOf(1n)
    assert.deepEqual(events.map((event) => event.type), ['order.created', 'order.updated'])
    assert.deepEqual(events[1]!.previous, { petId: '7', quantity: '2', shipDate: '2026-12-01T10:00:00.000Z', metadata: null })
    assert.equal(events[1]!.order.petId, String(BEYOND_2_53))

    // A key removed, one replaced, the ship date removed; the other key stays.
    const second = await cli(['orders', 'update', '1', '--unset-meta', 'customer', '--meta', 'note=plain', '--meta', 'cart=', '--no-ship-date'], env)
    assertOk(second)
    assert.equal(second.stdout, 'order 1 updated to version 3: shipDate 2026-12-24T08:30:00.000Z -> none, metadata note set, metadata cart set, metadata customer removed\n')
    const after = await find(1n)
    assert.deepEqual([after.shipDate, after.metadata, after.version], [null, { note: 'plain', cart: '' }, 3])
    assert.deepEqual((await eventsOf(1n))[2]!.previous, {
      shipDate: '2026-12-24T08:30:00.000Z',
      metadata: { customer: 'c-1042', note: 'gift wrap, a=b' },
    })

    // The int64 maximum, both as the order and as its pet.
    const max = await cli(['orders', 'update', String(MAX), '--pet-id', String(MAX)], env)
    assertOk(max)
    assert.equal(max.stdout, `order ${MAX} updated to version 2: petId 1 -> ${MAX}\n`)
    assert.equal((await find(MAX)).petId, MAX)
  })

  it('a patch that changes nothing: says so with the version, exit 0; nothing written, no event', async () => {
    const before = await find(4n)
    const eventsBefore = await eventsOf(4n)
    const result = await cli(['orders', 'update', '4', '--quantity', '4', '--ship-date', '2026-12-02T11:00:00+01:00', '--unset-meta', 'absent'], env)
    assertOk(result)
    assert.equal(result.stdout, `order 4 unchanged at version ${before.version}: it already has these values\n`)
    assert.deepEqual(await find(4n), before)
    assert.deepEqual(await eventsOf(4n), eventsBefore)
  })

  it("a shipped or cancelled order's pet, quantity or ship date: refused (exit 1), nothing changed; its metadata changes; unknown: refused", async () => {
    const shipped = await find(2n)
    assertOneLineError(
      await cli(['orders', 'update', '2', '--quantity', '5', '--meta', 'tracking=1Z999'], env),
      1,
      /^petstore-orders: order 2 has shipped or been cancelled; its pet, quantity and ship date change only while it is pending \(its metadata changes in any state\); nothing changed$/,
    )
    assert.deepEqual(await find(2n), shipped, 'not even the metadata of the refused patch')
    assertOneLineError(await cli(['orders', 'update', '3', '--ship-date', '2027-01-01T00:00:00Z'], env), 1, /order 3 has shipped or been cancelled/)
    const meta = await cli(['orders', 'update', '2', '--meta', 'tracking=1Z999'], env)
    assertOk(meta)
    assert.equal(meta.stdout, 'order 2 updated to version 2: metadata tracking set\n')
    assert.deepEqual([(await find(2n)).status, (await find(2n)).metadata], ['shipped', { tracking: '1Z999' }])
    // The values it has already are no change, so no refusal.
    assert.equal((await cli(['orders', 'update', '2', '--quantity', '1'], env)).stdout, 'order 2 unchanged at version 2: it already has these values\n')
    assertOneLineError(await cli(['orders', 'update', '404', '--quantity', '1'], env), 1, /^petstore-orders: order 404 does not exist$/)
  })

  it('more than 50 keys after the merge: refused (exit 1), naming the limit; nothing changed', async () => {
    const fifty = Array.from({ length: 50 }, (_, i) => ['--meta', `k${i}=v${i}`]).flat()
    assertOk(await cli(['orders', 'update', '5', ...fifty], env))
    assert.equal(Object.keys((await find(5n)).metadata ?? {}).length, 50)
    const before = await find(5n)
    assertOneLineError(await cli(['orders', 'update', '5', '--meta', 'one=more'], env), 1, /^petstore-orders: order 5: metadata must have at most 50 keys; nothing changed$/)
    assert.deepEqual(await find(5n), before)
    // One out, one in: 50 again.
    assertOk(await cli(['orders', 'update', '5', '--unset-meta', 'k0', '--meta', 'one=more'], env))
    assert.equal(Object.keys((await find(5n)).metadata ?? {}).length, 50)
  })

  it('bad options: one line naming the problem, exit 2, nothing written', async () => {
    const before = await find(4n)
    const eventsBefore = await eventsOf(4n)
    const see = "; see 'petstore-orders orders update --help'$"
    const cases: [string[], string][] = [
      [[], 'nothing to change: give --pet-id, --quantity, --ship-date, --no-ship-date, --meta or --unset-meta'],
      [['--quantity', '0'], '--quantity must be an integer from 1 to 1000, got "0"'],
      [['--quantity', '1001'], '--quantity must be an integer from 1 to 1000, got "1001"'],
      [['--quantity', '2.5'], '--quantity must be an integer from 1 to 1000, got "2.5"'],
      [['--quantity', 'three'], '--quantity must be an integer from 1 to 1000, got "three"'],
      [['--pet-id', '0'], '--pet-id must be a pet id, an integer from 1 to 9223372036854775807, got "0"'],
      [['--pet-id=-7'], '--pet-id must be a pet id, an integer from 1 to 9223372036854775807, got "-7"'],
      [['--pet-id', '9223372036854775808'], '--pet-id must be a pet id, an integer from 1 to 9223372036854775807, got "9223372036854775808"'],
      [['--pet-id', '1e3'], '--pet-id must be a pet id, an integer from 1 to 9223372036854775807, got "1e3"'],
      [['--ship-date', 'tomorrow'], '--ship-date must be an RFC 3339 date-time with a timezone, such as 2026-12-01T10:00:00Z, got "tomorrow"'],
      [['--ship-date', '2026-12-01T10:00:00'], '--ship-date must be an RFC 3339 date-time with a timezone, such as 2026-12-01T10:00:00Z, got "2026-12-01T10:00:00"'],
      [['--ship-date', '2026-02-30T10:00:00Z'], '--ship-date must be an RFC 3339 date-time with a timezone, such as 2026-12-01T10:00:00Z, got "2026-02-30T10:00:00Z"'],
      [['--ship-date', '2026-12-01T10:00:00Z', '--no-ship-date'], '--ship-date and --no-ship-date cannot both be given'],
      [['--no-ship-date=yes'], 'option --no-ship-date does not take a value'],
      [['--meta', 'customer'], '--meta must be KEY=VALUE, got "customer"'],
      [['--meta', 'has space=x'], '--meta: metadata key "has space" must be 1 to 40 characters of A-Z a-z 0-9 _ - . :'],
      [['--meta', '=x'], '--meta: metadata key "" must be 1 to 40 characters of A-Z a-z 0-9 _ - . :'],
      [['--meta', `${'k'.repeat(41)}=x`], `--meta: metadata key "${'k'.repeat(41)}" must be 1 to 40 characters of A-Z a-z 0-9 _ - . :`],
      [['--meta', `note=${'é'.repeat(501)}`], '--meta: metadata value of "note" must be at most 500 characters'],
      [['--unset-meta', 'bad/key'], '--unset-meta: metadata key "bad/key" must be 1 to 40 characters of A-Z a-z 0-9 _ - . :'],
      [['--meta', 'a=1', '--meta', 'a=2'], 'metadata key "a" is given more than once'],
      [['--meta', 'a=1', '--unset-meta', 'a'], 'metadata key "a" is given more than once'],
      [Array.from({ length: 51 }, (_, i) => ['--unset-meta', `k${i}`]).flat(), '--meta and --unset-meta may name at most 50 keys, got 51'],
      [['--status', 'shipped'], 'unknown option --status'],
    ]
    // Side by side: none of them opens the database.
    const results = await Promise.all(cases.map(([args]) => cli(['orders', 'update', '4', ...args], env)))
    cases.forEach(([, message], i) => {
      const escaped = message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
      assertOneLineError(results[i]!, 2, new RegExp(`^petstore-orders: ${escaped}${see}`))
    })
    // The id, checked as orders ship checks it.
    assertOneLineError(await cli(['orders', 'update', 'four', '--quantity', '1'], env), 2, /ID must be an order id, an integer from 1 to 9223372036854775807, got "four"/)
    assertOneLineError(await cli(['orders', 'update', '--quantity', '1'], env), 2, /missing ID \(the id of the order to change\)/)
    // A value of 500 characters, é included, is one: the limit counts characters.
    assertOk(await cli(['orders', 'update', '4', '--meta', `note=${'é'.repeat(500)}`], env))
    assert.equal([...((await find(4n)).metadata?.note ?? '')].length, 500)
    assert.equal((await find(4n)).version, before.version + 1)
    assert.equal((await eventsOf(4n)).length, eventsBefore.length + 1, 'only the good command wrote')
  })
})

describe('petstore-orders orders update: help, and a bad option opens no database', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'petstore-cli-update-'))
  after(() => rmSync(scratch, { recursive: true, force: true }))

  it('--help: usage, the rules, examples; listed among the commands', async () => {
    const help = await cli(['orders', 'update', '--help'])
    assertOk(help)
    assert.ok(help.stdout.startsWith('Usage: petstore-orders orders update ID [--pet-id N] [--quantity N] [--ship-date D | --no-ship-date]'))
    assert.match(help.stdout, /\[--meta KEY=VALUE\]\.\.\. \[--unset-meta KEY\]\.\.\./)
    assert.match(help.stdout, /change only while the order is pending/)
    assert.match(help.stdout, /Metadata changes in any state/)
    assert.match(help.stdout, /Examples:\n {2}petstore-orders orders update 10 /)
    assert.match((await cli(['--help'])).stdout, /\n {2}orders update ID \[OPTIONS\] +change a pending order's pet, quantity or ship date, or any order's metadata\n/)
    assert.match((await cli(['orders', '--help'])).stdout, /orders update ID \[OPTIONS\]/)
  })

  it('a bad option is refused before the database is opened: a SQLite file that does not exist is not made', async () => {
    const path = join(scratch, 'never', 'never.db')
    assertOneLineError(await cli(['orders', 'update', '1', '--quantity', '0'], { DATABASE_URL: `sqlite:${path}` }), 2, /--quantity must be/)
    assert.equal(existsSync(path), false)
    assertOneLineError(await cli(['orders', 'update', '1', '--quantity', '1'], { DATABASE_URL: `sqlite:${path}` }), 1, /never\.db/)
    assert.equal(existsSync(path), false)
  })
})
