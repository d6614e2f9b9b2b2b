import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { describe, test } from 'node:test'
import {
  detectFormat,
  ImportFileError,
  MAX_RECORD_BYTES,
  parseJsonText,
  readJsonRecords,
  readOrderRecords,
  readPetRecords,
  type ImportSource,
} from '../src/cli/import-records.js'
import { InvalidRecordError, JsonNumber, validateOrderRecord, validatePetRecord } from '../src/cli/import-validation.js'
import { demoOrders, demoPetCount, demoPets } from '../src/demo/demo-data.js'
import type { OrderRecord } from '../src/domain/orders.js'

const MAX = 9223372036854775807n

/** A source over `text`, delivered in chunks of `chunkSize` bytes (small chunks split tokens and characters). */
function source(text: string, chunkSize = 64 * 1024): ImportSource & { opened: number } {
  const bytes = Buffer.from(text, 'utf8')
  const result = {
    opened: 0,
    open() {
      result.opened++
      const chunks: Buffer[] = []
      for (let i = 0; i < bytes.length; i += chunkSize) chunks.push(bytes.subarray(i, i + chunkSize))
      return Readable.from(chunks, { objectMode: false })
    },
  }
  return result
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const item of items) out.push(item)
  return out
}

async function importError(items: AsyncIterable<unknown>): Promise<ImportFileError> {
  try {
    await collect(items)
  } catch (error) {
    assert.ok(error instanceof ImportFileError, `expected an ImportFileError, got ${String(error)}`)
    return error
  }
  assert.fail('expected the reading to fail')
}

/** Validates the record `text` as the readers would hand it over (numbers as JsonNumber). */
function order(text: string): OrderRecord {
  return validateOrderRecord(parseJsonText(text))
}

function refused(validate: (value: unknown) => unknown, text: string, pattern: RegExp): void {
  assert.throws(
    () => validate(parseJsonText(text)),
    (error: unknown) => {
      assert.ok(error instanceof InvalidRecordError, String(error))
      assert.match(error.message, pattern)
      return true
    },
    `${text} should be refused`,
  )
}

describe('order records', () => {
  test('a full record', () => {
    assert.deepEqual(
      order('{"id": 9223372036854775807, "petId": 9007199254740993, "quantity": 7, "shipDate": "2026-11-25T11:00:00+01:00", "complete": true, "status": "shipped"}'),
      { id: MAX, petId: 9007199254740993n, quantity: 7, shipDate: '2026-11-25T10:00:00.000Z', complete: true, status: 'shipped' },
    )
  })

  test('only id is required; absent and null mean the defaults', () => {
    const expected: OrderRecord = { id: 1n, petId: null, quantity: null, shipDate: null, complete: false, status: 'pending' }
    assert.deepEqual(order('{"id": 1}'), expected)
    assert.deepEqual(order('{"id": 1, "petId": null, "quantity": null, "shipDate": null, "complete": null, "status": null}'), expected)
  })

  test('ids: JSON integers or decimal strings from 1 to 2^63−1, nothing else', () => {
    assert.equal(order('{"id": 9223372036854775807}').id, MAX)
    assert.equal(order('{"id": "9223372036854775807"}').id, MAX)
    assert.equal(order('{"id": 9007199254740993}').id, 9007199254740993n)
    assert.equal(order('{"id": "0042"}').id, 42n)
    refused(validateOrderRecord, '{"petId": 1}', /^id is required$/)
    refused(validateOrderRecord, '{"id": null}', /^id is required$/)
    refused(validateOrderRecord, '{"id": 9223372036854775808}', /^id must be an integer from 1 to 9223372036854775807, got 9223372036854775808$/)
    refused(validateOrderRecord, '{"id": "9223372036854775808"}', /^id must be an integer from 1 to 9223372036854775807, got "9223372036854775808"$/)
    for (const id of ['0', '-1', '1.5', '1e3', '1.0', '" 1"', '"0x10"', '""', '"abc"', 'true', '[1]', '{}', '-9223372036854775808']) {
      refused(validateOrderRecord, `{"id": ${id}}`, /^id must be an integer from 1 to 9223372036854775807, got /)
    }
    refused(validateOrderRecord, '{"id": 1, "petId": 0}', /^petId must be an integer/)
    refused(validateOrderRecord, '{"id": 1, "petId": 18446744073709551616}', /^petId must be an integer/)
  })

  test('quantity: a JSON integer from 1 to 2147483647', () => {
    assert.equal(order('{"id": 1, "quantity": 1}').quantity, 1)
    assert.equal(order('{"id": 1, "quantity": 2147483647}').quantity, 2147483647)
    for (const quantity of ['0', '-3', '2147483648', '99999999999999999999', '2.5', '1e2', '1.0', 'false', '"many"', '"5"']) {
      refused(validateOrderRecord, `{"id": 1, "quantity": ${quantity}}`, /^quantity must be an integer from 1 to 2147483647, got /)
    }
    refused(validateOrderRecord, '{"id": 1, "quantity": "5"}', /got "5"$/) // a string shows quoted
  })

  test('shipDate: RFC 3339 with a timezone, stored in UTC', () => {
    const ship = (shipDate: string): string | null => order(`{"id": 1, "shipDate": ${JSON.stringify(shipDate)}}`).shipDate
    assert.equal(ship('2026-11-25T10:00:00Z'), '2026-11-25T10:00:00.000Z')
    assert.equal(ship('2026-11-25t10:00:00z'), '2026-11-25T10:00:00.000Z')
    assert.equal(ship('2026-11-25T10:00:00.5Z'), '2026-11-25T10:00:00.500Z')
    assert.equal(ship('2026-11-25T10:00:00.123456789Z'), '2026-11-25T10:00:00.124Z') // a finer fraction rounds up
    assert.equal(ship('2026-11-25T01:30:00-05:30'), '2026-11-25T07:00:00.000Z')
    assert.equal(ship('2026-01-01T00:30:00+01:00'), '2025-12-31T23:30:00.000Z')
    assert.equal(ship('2024-02-29T00:00:00Z'), '2024-02-29T00:00:00.000Z')
    assert.equal(ship('0050-06-01T00:00:00Z'), '0050-06-01T00:00:00.000Z') // not 1950
    for (const bad of [
      '2026-11-25', // no time
      '2026-11-25T10:00:00', // no timezone
      '2026-11-25 10:00:00Z',
      '2026-11-25T10:00Z',
      '2025-02-29T00:00:00Z', // not a leap year
      '2026-04-31T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-11-25T24:00:00Z',
      '2026-11-25T23:59:60Z', // leap second: a JS Date cannot hold it
      '2026-11-25T10:00:00+24:00',
      '0001-01-01T00:00:00+01:00', // year 0 in UTC
      'tomorrow',
    ]) {
      refused(validateOrderRecord, `{"id": 1, "shipDate": ${JSON.stringify(bad)}}`, /^shipDate must be an RFC 3339 date-time with a timezone/)
    }
    refused(validateOrderRecord, '{"id": 1, "shipDate": 1764064800000}', /^shipDate must be .*, got 1764064800000$/)
  })

  test('complete is a boolean, true only for a shipped order; status one of three', () => {
    assert.equal(order('{"id": 1, "complete": false, "status": "cancelled"}').status, 'cancelled')
    refused(validateOrderRecord, '{"id": 1, "complete": "yes"}', /^complete must be true or false, got "yes"$/)
    refused(validateOrderRecord, '{"id": 1, "complete": 1}', /^complete must be true or false, got 1$/)
    refused(validateOrderRecord, '{"id": 1, "complete": true}', /^complete is true but status is "pending"; only a shipped order can be complete$/)
    refused(validateOrderRecord, '{"id": 1, "complete": true, "status": "cancelled"}', /status is "cancelled"/)
    refused(validateOrderRecord, '{"id": 1, "status": "delivered"}', /^status must be one of pending, shipped, cancelled, got "delivered"$/)
    refused(validateOrderRecord, '{"id": 1, "status": "PENDING"}', /^status must be one of/)
  })

  test('a cancelled order may carry its cancellation time (RFC 3339, stored in UTC) and reason', () => {
    assert.deepEqual(order('{"id": 1, "status": "cancelled", "cancelledAt": "2026-11-20T09:15:00.1234+01:00", "cancellationReason": "out_of_stock"}'), {
      id: 1n, petId: null, quantity: null, shipDate: null, complete: false, status: 'cancelled',
      cancelledAt: '2026-11-20T08:15:00.124Z', cancellationReason: 'out_of_stock', // a finer fraction rounds up
    })
    // Either alone; null is absent (then the import's time, and no reason).
    assert.deepEqual(order('{"id": 1, "status": "cancelled", "cancellationReason": "other"}').cancellationReason, 'other')
    assert.ok(!('cancelledAt' in order('{"id": 1, "status": "cancelled", "cancellationReason": "other"}')))
    assert.equal(order('{"id": 1, "status": "cancelled", "cancelledAt": "2026-11-20T08:15:00Z"}').cancelledAt, '2026-11-20T08:15:00.000Z')
    assert.deepEqual(order('{"id": 1, "status": "cancelled", "cancelledAt": null, "cancellationReason": null}'), {
      id: 1n, petId: null, quantity: null, shipDate: null, complete: false, status: 'cancelled',
    })
    for (const reason of ['customer_request', 'out_of_stock', 'duplicate', 'fraudulent', 'other']) {
      assert.equal(order(`{"id": 1, "status": "cancelled", "cancellationReason": "${reason}"}`).cancellationReason, reason)
    }
  })

  test('cancelledAt and cancellationReason: valid values, and on a cancelled order only, naming the order', () => {
    refused(validateOrderRecord, '{"id": 1, "status": "cancelled", "cancelledAt": "2026-11-20"}', /^cancelledAt must be an RFC 3339 date-time with a timezone/)
    refused(validateOrderRecord, '{"id": 1, "status": "cancelled", "cancelledAt": 1764064800000}', /^cancelledAt must be .*, got 1764064800000$/)
    refused(validateOrderRecord, '{"id": 1, "status": "cancelled", "cancellationReason": "bored"}', /^cancellationReason must be one of customer_request, out_of_stock, duplicate, fraudulent, other, got "bored"$/)
    refused(validateOrderRecord, '{"id": 1, "status": "cancelled", "cancellationReason": "Other"}', /^cancellationReason must be one of/)
    refused(validateOrderRecord, '{"id": 1, "status": "cancelled", "cancellationReason": 3}', /got 3$/)
    refused(validateOrderRecord, '{"id": 7, "cancelledAt": "2026-11-20T08:15:00Z"}', /^order 7: cancelledAt is given but status is "pending"; only a cancelled order has one$/)
    refused(validateOrderRecord, '{"id": 7, "status": "shipped", "cancellationReason": "other"}', /^order 7: cancellationReason is given but status is "shipped"; only a cancelled order has one$/)
  })

  test('a refused record is named by its position in the file', async () => {
    const file = source('{"id": 1, "status": "cancelled", "cancellationReason": "other"}\n{"id": 2, "cancellationReason": "other"}\n')
    assert.equal(
      (await importError(readOrderRecords(file))).message,
      'line 2: order 2: cancellationReason is given but status is "pending"; only a cancelled order has one',
    )
  })

  test('metadata: an object of string values, in any status; kept in the record\'s key order', () => {
    const metadata = { customer: 'c-1042', 'cart.id': 'A:9-x_1', note: 'Zoë 🐈 — ' + '🐕'.repeat(490) }
    assert.deepEqual(order(`{"id": 1, "metadata": ${JSON.stringify(metadata)}}`), {
      id: 1n, petId: null, quantity: null, shipDate: null, complete: false, status: 'pending', metadata,
    })
    assert.deepEqual(Object.keys(order(`{"id": 1, "metadata": ${JSON.stringify(metadata)}}`).metadata!), ['customer', 'cart.id', 'note'])
    for (const status of ['"shipped", "complete": true', '"cancelled"']) {
      assert.deepEqual(order(`{"id": 1, "status": ${status}, "metadata": {"a": "b"}}`).metadata, { a: 'b' })
    }
    // 50 keys of 40 characters, each value 500 characters (code points: 🐕 is two UTF-16 units), empty values too.
    const full = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`${i}`.padStart(40, 'k'), i === 0 ? '' : '🐕'.repeat(500)]))
    assert.deepEqual(order(`{"id": 1, "metadata": ${JSON.stringify(full)}}`).metadata, full)
  })

  test('metadata null, absent or {}: none (the record has no metadata, as one without petId has no petId)', () => {
    const none: OrderRecord = { id: 1n, petId: null, quantity: null, shipDate: null, complete: false, status: 'pending' }
    for (const text of ['{"id": 1}', '{"id": 1, "metadata": null}', '{"id": 1, "metadata": {}}']) {
      const record = order(text)
      assert.deepEqual(record, none, text)
      assert.ok(!('metadata' in record), text)
    }
  })

  test('metadata breaking a rule is refused, naming the key; as the API\'s limits', () => {
    const keys = (n: number): string => JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v'])))
    refused(validateOrderRecord, `{"id": 1, "metadata": ${keys(51)}}`, /^metadata must have at most 50 keys, got 51$/)
    const long = 'k'.repeat(41)
    refused(validateOrderRecord, `{"id": 1, "metadata": {"a": "b", "${long}": "v"}}`, new RegExp(`^metadata key "${long}" must be 1 to 40 characters of A-Z a-z 0-9 _ - \\. :$`))
    refused(validateOrderRecord, '{"id": 1, "metadata": {"": "v"}}', /^metadata key "" must be 1 to 40 characters/)
    for (const key of ['a b', 'cart/id', 'é', 'a\\u0000', 'x+y', '#']) {
      refused(validateOrderRecord, `{"id": 1, "metadata": {${JSON.stringify(key)}: "v"}}`, /^metadata key ".*" must be 1 to 40 characters of A-Z a-z 0-9 _ - \. :$/)
    }
    refused(validateOrderRecord, '{"id": 1, "metadata": {"a b": "v"}}', /^metadata key "a b" must/)
    refused(validateOrderRecord, '{"id": 1, "metadata": {"qty": 5}}', /^metadata value of "qty" must be a string, got 5$/)
    refused(validateOrderRecord, '{"id": 1, "metadata": {"id": 9223372036854775807}}', /^metadata value of "id" must be a string, got 9223372036854775807$/)
    refused(validateOrderRecord, '{"id": 1, "metadata": {"gift": true}}', /^metadata value of "gift" must be a string, got true$/)
    refused(validateOrderRecord, '{"id": 1, "metadata": {"a": "b", "gone": null}}', /^metadata value of "gone" must be a string, got null$/)
    refused(validateOrderRecord, '{"id": 1, "metadata": {"address": {"city": "Oslo"}}}', /^metadata value of "address" must be a string, got an object$/)
    refused(validateOrderRecord, '{"id": 1, "metadata": {"tags": ["a"]}}', /^metadata value of "tags" must be a string, got an array$/)
    refused(validateOrderRecord, `{"id": 1, "metadata": {"note": "${'x'.repeat(501)}"}}`, /^metadata value of "note" must be at most 500 characters$/)
    refused(validateOrderRecord, `{"id": 1, "metadata": {"note": "${'🐕'.repeat(501)}"}}`, /^metadata value of "note" must be at most 500 characters$/)
    refused(validateOrderRecord, '{"id": 1, "metadata": {"note": "a\\u0000b"}}', /^metadata value of "note" must not contain U\+0000$/)
    refused(validateOrderRecord, '{"id": 1, "metadata": {"note": "\\ud800"}}', /^metadata value of "note" has a lone surrogate$/)
    for (const [value, shown] of [['"c-1042"', '"c-1042"'], ['["a"]', 'an array'], ['7', '7'], ['true', 'true']]) {
      refused(validateOrderRecord, `{"id": 1, "metadata": ${value}}`, new RegExp(`^metadata must be an object of string values, got ${shown!.replace(/[[\]]/g, '\\$&')}$`))
    }
  })

  test('metadata keys __proto__ and constructor are plain keys, from either file format; no prototype changes', async () => {
    const text = '{"id": 1, "metadata": {"__proto__": "p", "constructor": "c", "toString": "t", "hasOwnProperty": "h"}}'
    const fromArray = (await collect(readOrderRecords(source(`[${text}]`))))[0]!
    const fromNdjson = (await collect(readOrderRecords(source(`${text}\n`))))[0]!
    for (const record of [order(text), fromArray, fromNdjson]) {
      const metadata = record.metadata!
      assert.deepEqual(Object.keys(metadata), ['__proto__', 'constructor', 'toString', 'hasOwnProperty'])
      assert.equal(Object.getPrototypeOf(metadata), Object.prototype)
      assert.equal(Object.getOwnPropertyDescriptor(metadata, '__proto__')?.value, 'p')
      assert.equal(metadata.constructor, 'c')
      assert.equal(JSON.stringify(metadata), '{"__proto__":"p","constructor":"c","toString":"t","hasOwnProperty":"h"}')
    }
    // An object as the value of __proto__ is a value like any other: refused, not made a prototype.
    for (const file of ['[{"id": 1, "metadata": {"__proto__": {"polluted": "yes"}}}]', '{"id": 1, "metadata": {"__proto__": {"polluted": "yes"}}}\n']) {
      assert.equal((await importError(readOrderRecords(source(file)))).reason, 'metadata value of "__proto__" must be a string, got an object')
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined)
  })

  test('a record with bad metadata is named by its position and the key', async () => {
    const lines = '{"id": 1, "metadata": {"a": "b"}}\n{"id": 2, "metadata": {"ok": "1", "bad key": "v"}}\n'
    assert.equal((await importError(readOrderRecords(source(lines)))).message, 'line 2: metadata key "bad key" must be 1 to 40 characters of A-Z a-z 0-9 _ - . :')
    const array = '[{"id": 1}, {"id": 2}, {"id": 3, "metadata": {"n": 1}}]'
    assert.equal((await importError(readOrderRecords(source(array)))).message, 'record 3: metadata value of "n" must be a string, got 1')
  })

  test('anything but an object of the nine fields is refused', () => {
    refused(validateOrderRecord, '{"id": 1, "price": 3}', /^unknown field "price" \(an order has id, petId, quantity, shipDate, complete, status, cancelledAt, cancellationReason, metadata\)$/)
    refused(validateOrderRecord, '{"id": 1, "__proto__": {"x": 1}}', /^unknown field "__proto__"/)
    refused(validateOrderRecord, '[1]', /^expected a JSON object, got an array$/)
    refused(validateOrderRecord, 'null', /^expected a JSON object, got null$/)
    refused(validateOrderRecord, '12', /^expected a JSON object, got 12$/)
    refused(validateOrderRecord, JSON.stringify('x'.repeat(100)), /got "x{40}…"$/)
  })
})

describe('pet records', () => {
  const pet = (text: string): unknown => validatePetRecord(parseJsonText(text))

  test('id and name required, tag optional', () => {
    assert.deepEqual(pet('{"id": 9223372036854775807, "name": "Rex", "tag": "dog"}'), { id: MAX, name: 'Rex', tag: 'dog' })
    assert.deepEqual(pet('{"id": "2", "name": "Tom"}'), { id: 2n, name: 'Tom' })
    assert.deepEqual(pet('{"id": 2, "name": "Tom", "tag": null}'), { id: 2n, name: 'Tom' })
    assert.deepEqual(pet(`{"id": 3, "name": "${'🐕'.repeat(200)}"}`), { id: 3n, name: '🐕'.repeat(200) }) // 200 characters
    refused(validatePetRecord, '{"name": "Rex"}', /^id is required$/)
    refused(validatePetRecord, '{"id": 1}', /^name is required$/)
    refused(validatePetRecord, '{"id": 1, "name": ""}', /^name must be 1 to 200 characters and not blank, got ""$/)
    refused(validatePetRecord, '{"id": 1, "name": "   "}', /^name must be 1 to 200 characters/)
    refused(validatePetRecord, `{"id": 1, "name": "${'x'.repeat(201)}"}`, /^name must be 1 to 200 characters/)
    refused(validatePetRecord, '{"id": 1, "name": 5}', /^name must be a string, got 5$/)
    refused(validatePetRecord, '{"id": 1, "name": true}', /^name must be a string, got true$/)
    refused(validatePetRecord, '{"id": 1, "name": "Rex", "tag": ""}', /^tag must be 1 to 200 characters/)
    refused(validatePetRecord, '{"id": 1, "name": "Rex", "tag": 7}', /^tag must be a string, got 7$/)
    refused(validatePetRecord, '{"id": 1, "name": "Rex", "status": "available"}', /^unknown field "status" \(a pet has id, name, tag\)$/)
    refused(validatePetRecord, '{"id": 0, "name": "Rex"}', /^id must be an integer from 1 to/)
  })
})

describe('reading files', () => {
  const orders = [
    '{"id": 9007199254740993, "petId": 9223372036854775807, "quantity": 7, "shipDate": "2026-11-25T10:00:00Z"}',
    '{"id": "9223372036854775807", "status": "shipped", "complete": true}',
    '{"id": 3, "status": "cancelled"}',
  ]

  test('the format is told by the first character that is not whitespace, and the input handed back whole', async () => {
    const cases: [string, number, string][] = [
      ['  \n\t[1]', 64 * 1024, 'json-array'],
      ['\ufeff[1]', 64 * 1024, 'json-array'],
      ['\ufeff[1]', 1, 'json-array'], // the mark split over three chunks
      ['\ufeff{"id": 1}', 2, 'ndjson'],
      ['\n\n{"id": 1}\n', 64 * 1024, 'ndjson'],
      ['', 64 * 1024, 'ndjson'],
      [`${' '.repeat(100)}[`, 7, 'json-array'],
      [' \ufeff[1]', 64 * 1024, 'ndjson'], // a mark after the first byte is no mark
    ]
    for (const [text, chunkSize, format] of cases) {
      const detected = await detectFormat(source(text, chunkSize).open())
      assert.equal(detected.format, format, JSON.stringify(text))
      const chunks: Buffer[] = []
      for await (const chunk of detected.chunks) chunks.push(chunk)
      assert.equal(Buffer.concat(chunks).toString('utf8'), text)
    }
  })

  test('an input that can be read only once (a pipe) is read once, whole; a malformed array is then placed by its record', async () => {
    const once = (text: string, chunkSize = 5): ImportSource & { opened: number } => {
      const inner = source(text, chunkSize)
      return {
        rereadable: false,
        get opened() {
          return inner.opened
        },
        open() {
          if (inner.opened > 0) throw new Error('opened twice')
          return inner.open()
        },
      }
    }
    for (const text of [`[${orders.join(',')}]`, `\ufeff${orders.join('\n')}\n`]) {
      const input = once(text)
      const records = await collect(readOrderRecords(input))
      assert.deepEqual(records.map((record) => record.id), [BigInt('9007199254740993'), BigInt('9223372036854775807'), 3n])
      assert.equal(input.opened, 1)
    }
    const bad = once('[{"id": 1},,]')
    assert.equal((await importError(readOrderRecords(bad))).message, 'after record 1: malformed JSON: unexpected input')
    assert.equal(bad.opened, 1)
  })

  test('a JSON array and NDJSON give the same records, ids exact', async () => {
    const expected = [
      { id: 9007199254740993n, petId: MAX, quantity: 7, shipDate: '2026-11-25T10:00:00.000Z', complete: false, status: 'pending' },
      { id: MAX, petId: null, quantity: null, shipDate: null, complete: true, status: 'shipped' },
      { id: 3n, petId: null, quantity: null, shipDate: null, complete: false, status: 'cancelled' },
    ]
    const array = `[\n  ${orders.join(',\n  ')}\n]\n`
    const ndjson = `${orders.join('\n')}\n`
    for (const chunkSize of [1, 3, 64 * 1024]) {
      assert.deepEqual(await collect(readOrderRecords(source(array, chunkSize))), expected, `array, chunks of ${chunkSize}`)
      assert.deepEqual(await collect(readOrderRecords(source(ndjson, chunkSize))), expected, `NDJSON, chunks of ${chunkSize}`)
    }
  })

  test('positions: record N in an array, line N in NDJSON (blank lines and CRLF counted as lines)', async () => {
    const array = await collect(readJsonRecords(source('[{"id": 1}, {"id": 2},\n{"id": 3}]')))
    assert.deepEqual(array.map((r) => r.position), ['record 1', 'record 2', 'record 3'])
    const lines = await collect(readJsonRecords(source('\ufeff{"id": 1}\r\n\r\n   \n{"id": 2}\n{"id": 3}')))
    assert.deepEqual(lines.map((r) => r.position), ['line 1', 'line 4', 'line 5'])
    assert.deepEqual(lines.map((r) => r.value), [1, 2, 3].map((id) => ({ id: new JsonNumber(String(id)) })))
  })

  test('non-ASCII text split across chunks survives', async () => {
    const pets = await collect(readPetRecords(source('[{"id": 1, "name": "Zoë 🐈 Ōkami"}]', 1)))
    assert.equal(pets[0]!.name, 'Zoë 🐈 Ōkami')
    const ndjson = await collect(readPetRecords(source('{"id": 1, "name": "Zoë 🐈 Ōkami"}\n', 1)))
    assert.equal(ndjson[0]!.name, 'Zoë 🐈 Ōkami')
  })

  test('empty files and empty arrays hold no records', async () => {
    assert.deepEqual(await collect(readOrderRecords(source(''))), [])
    assert.deepEqual(await collect(readOrderRecords(source('\n \n'))), [])
    assert.deepEqual(await collect(readOrderRecords(source(' [ ] '))), [])
  })

  test('a duplicate id is kept twice (the store upserts: the last wins); a duplicate key too', async () => {
    const records = await collect(readOrderRecords(source('{"id": 5, "quantity": 1}\n{"id": 5, "quantity": 2}\n')))
    assert.deepEqual(records.map((r) => [r.id, r.quantity]), [[5n, 1], [5n, 2]])
    for (const text of ['[{"id": 5, "quantity": 1, "quantity": 2}]', '{"id": 5, "quantity": 1, "quantity": 2}']) {
      assert.equal((await collect(readOrderRecords(source(text))))[0]!.quantity, 2, text)
    }
  })

  test('the first bad record stops the reading with its position and the reason', async () => {
    const array = `[${orders[0]}, ${orders[1]}, {"id": 4, "quantity": 0}, {"id": 5}]`
    const error = await importError(readOrderRecords(source(array)))
    assert.equal(error.message, 'record 3: quantity must be an integer from 1 to 2147483647, got 0')
    assert.equal(error.position, 'record 3')

    const ndjson = `${orders[0]}\n\n{"id": 4, "colour": "red"}\n{"id": 5}\n`
    assert.equal(
      (await importError(readOrderRecords(source(ndjson)))).message,
      'line 3: unknown field "colour" (an order has id, petId, quantity, shipDate, complete, status, cancelledAt, cancellationReason, metadata)',
    )
    assert.equal((await importError(readOrderRecords(source('[1]')))).message, 'record 1: expected a JSON object, got 1')
    assert.equal((await importError(readOrderRecords(source('{"id":1}\n[2]\n')))).message, 'line 2: expected a JSON object, got an array')
    assert.equal(
      (await importError(readPetRecords(source('[{"id": 9223372036854775808, "name": "Rex"}]')))).message,
      'record 1: id must be an integer from 1 to 9223372036854775807, got 9223372036854775808',
    )
  })

  test('malformed JSON: line and column', async () => {
    const cases: [string, string][] = [
      ['[{"id": 1},\n {"id": 2,,}]', 'line 2, column 11: malformed JSON: expected an object key'],
      ['[{"id": 1}] x', 'line 1, column 13: malformed JSON: unexpected characters'],
      ['[{"id": 1},\n{"id": 2', 'line 2, column 9: malformed JSON: unexpected end of file'],
      ['[{"id": 1}, {"id": 2}', 'line 1, column 22: malformed JSON: unexpected end of file'],
      ['{"id": 1}\n{"id": 2,,}\n', 'line 2, column 10: malformed JSON: quoted object key expected but got \',\''],
      ['{"id": 1}\n{"id": 2\n', 'line 2, column 9: malformed JSON: quoted object key or end of object \'}\' expected but reached end of input'],
      ['{"id": 1} {"id": 2}\n', 'line 1, column 11: malformed JSON: expected end of input but got \'{\''],
      ["{'id': 1}\n", "line 1, column 2: malformed JSON: quoted object key expected but got '''"],
    ]
    for (const [text, message] of cases) {
      for (const chunkSize of [2, 64 * 1024]) {
        assert.equal((await importError(readOrderRecords(source(text, chunkSize)))).message, message, `${text} (chunks of ${chunkSize})`)
      }
    }
  })

  test('only a malformed JSON array is read a second time (to find the line and column)', async () => {
    const good = source(`[${orders.join(',')}]`)
    await collect(readOrderRecords(good))
    assert.equal(good.opened, 1) // the format told from the same reading
    const bad = source('[{"id": 1},,]')
    await importError(readOrderRecords(bad))
    assert.equal(bad.opened, 2)
  })

  test('streams: the first record arrives long before the end of a large input; a failure stops the input', async () => {
    for (const format of ['json-array', 'ndjson'] as const) {
      let produced = 0
      let destroyed = false
      const total = 200_000
      const open = (): Readable => {
        produced = 0
        let i = 0
        const stream = new Readable({
          read() {
            if (i === total) {
              this.push(format === 'json-array' ? ']' : null)
              if (format === 'json-array') this.push(null)
              return
            }
            let chunk = ''
            for (let n = 0; n < 100 && i < total; n++, i++) {
              const record = `{"id": ${i + 1}, "quantity": ${i === 150_000 ? 0 : 1}}`
              chunk += format === 'json-array' ? `${i === 0 ? '[' : ','}${record}\n` : `${record}\n`
            }
            produced += chunk.length
            this.push(chunk)
          },
          destroy(error, callback) {
            destroyed = true
            callback(error)
          },
        })
        return stream
      }
      const records = readOrderRecords({ open })
      const first = await records.next()
      assert.equal((first.value as OrderRecord).id, 1n)
      assert.ok(produced < 1_000_000, `${format}: ${produced} bytes produced before the first record`)
      destroyed = false
      const error = await importError({ [Symbol.asyncIterator]: () => records })
      assert.equal(error.position, format === 'json-array' ? 'record 150001' : 'line 150001')
      await new Promise((resolve) => setImmediate(resolve))
      assert.ok(destroyed, `${format}: the input is destroyed after the failure`)
    }
  })
})

describe('the size of one record', () => {
  const MIB = 1024 * 1024

  /** A source of `head`, then `fill` repeated up to `total` bytes, then `tail`; counts what it produced. */
  function generated(head: string, fill: string, total: number, tail: string): ImportSource & { produced: () => number } {
    let produced = 0
    return {
      produced: () => produced,
      open() {
        let sent = 0
        const block = Buffer.from(fill.repeat(Math.ceil(64 * 1024 / fill.length)))
        return new Readable({
          read() {
            if (sent === 0) this.push(head)
            if (sent >= total) {
              this.push(tail)
              this.push(null)
              return
            }
            sent += block.length
            produced = sent
            this.push(block)
          },
        })
      },
    }
  }

  test('an NDJSON line over 1 MiB stops the reading at that line, without reading it whole', async () => {
    assert.equal(MAX_RECORD_BYTES, MIB)
    const line = (bytes: number): string => `{"id": 2, "petId": 1${' '.repeat(bytes - 21)}}`
    assert.equal(line(MIB).length, MIB)
    // Exactly 1 MiB (the CR of a CRLF counted) is read; one byte more is refused, by its line.
    const fits = await collect(readOrderRecords(source(`{"id": 1}\n${line(MIB)}\n`, 7000)))
    assert.deepEqual(fits.map((r) => r.id), [1n, 2n])
    for (const text of [`{"id": 1}\n${line(MIB + 1)}\n{"id": 3}\n`, `{"id": 1}\r\n${line(MIB)}\r\n`, `{"id": 1}\n${line(MIB + 1)}`]) {
      const error = await importError(readOrderRecords(source(text, 7000)))
      assert.equal(error.message, 'line 2: longer than 1 MiB, the most one record may take')
    }
    // 64 MiB without a line break: refused once the line passes 1 MiB.
    const endless = generated('{"id": 1}\n{"id": "', 'x', 64 * MIB, '"}\n')
    assert.equal((await importError(readOrderRecords(endless))).message, 'line 2: longer than 1 MiB, the most one record may take')
    assert.ok(endless.produced() < 3 * MIB, `${endless.produced()} bytes were read`)
  })

  test('an element of a JSON array over 1 MiB stops the reading at that record', async () => {
    const error = await importError(readPetRecords(source(`[{"id": 1, "name": "Rex"}, {"id": 2, "name": "${'x'.repeat(MIB)}"}]`, 64 * 1024)))
    assert.equal(error.message, 'record 2: larger than 1 MiB, the most one record may take')
    const fits = await collect(readJsonRecords(source(`[{"id": 1}, "${'x'.repeat(MIB - 100)}", [${'1,'.repeat(1000)}1]]`, 64 * 1024)))
    assert.equal(fits.length, 3)
    for (const fill of ['x', '1']) {
      const endless = generated(fill === 'x' ? '[{"id": 1}, {"id": 2, "name": "' : '[{"id": 1}, ', fill, 64 * MIB, fill === 'x' ? '"}]' : ']')
      assert.equal((await importError(readOrderRecords(endless))).message, 'record 2: larger than 1 MiB, the most one record may take')
      assert.ok(endless.produced() < 4 * MIB, `${endless.produced()} bytes were read`)
    }
  })
})

describe('demo data', () => {
  const now = new Date('2026-11-25T15:00:00Z')

  test('valid import records, deterministic, a realistic mix', async () => {
    const orders = await collect(demoOrders({ orders: 5000, seed: 7, now, firstOrderId: 100n }))
    assert.equal(orders.length, 5000)
    assert.deepEqual(orders.map((o) => o.id), Array.from({ length: 5000 }, (_, i) => 100n + BigInt(i)))
    for (const order of orders) {
      const text = JSON.stringify(order, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))
      assert.deepEqual(validateOrderRecord(parseJsonText(text)), order)
      assert.ok(order.petId! >= 1n && order.petId! <= BigInt(demoPetCount(5000)))
      assert.ok(order.quantity! >= 1 && order.quantity! <= 10)
    }
    const share = (status: string): number => orders.filter((o) => o.status === status).length / orders.length
    assert.ok(share('pending') > 0.55 && share('pending') < 0.65, `pending ${share('pending')}`)
    assert.ok(share('shipped') > 0.25 && share('shipped') < 0.35, `shipped ${share('shipped')}`)
    assert.ok(share('cancelled') > 0.07 && share('cancelled') < 0.13, `cancelled ${share('cancelled')}`)
    assert.ok(orders.some((o) => o.complete) && orders.some((o) => o.status === 'shipped' && !o.complete))
    const day = 86_400_000
    for (const o of orders.filter((o) => o.shipDate !== null)) {
      const t = Date.parse(o.shipDate!)
      assert.ok(Math.abs(t - now.getTime()) < 62 * day, o.shipDate!)
      if (o.status === 'shipped') assert.ok(t <= now.getTime())
    }
    assert.deepEqual(await collect(demoOrders({ orders: 5000, seed: 7, now, firstOrderId: 100n })), orders)
    assert.notDeepEqual(await collect(demoOrders({ orders: 5000, seed: 8, now, firstOrderId: 100n })), orders)
    // The same all day: dates count from the start of the UTC day.
    assert.deepEqual(await collect(demoOrders({ orders: 5000, seed: 7, now: new Date('2026-11-25T23:59:00Z'), firstOrderId: 100n })), orders)
  })

  test('pets: valid, one for every four orders, pet N always the same', async () => {
    assert.equal(demoPetCount(1), 1)
    assert.equal(demoPetCount(1000), 250)
    assert.equal(demoPetCount(10_000_000), 100_000)
    const pets = await collect(demoPets(250))
    assert.equal(pets.length, 250)
    for (const [i, pet] of pets.entries()) {
      assert.equal(pet.id, BigInt(i + 1))
      assert.deepEqual(validatePetRecord(parseJsonText(JSON.stringify({ ...pet, id: pet.id.toString() }))), pet)
    }
    assert.deepEqual((await collect(demoPets(10))), pets.slice(0, 10))
  })

  test('ids stay in the int64 range', async () => {
    assert.equal((await collect(demoOrders({ orders: 1, firstOrderId: MAX, now })))[0]!.id, MAX)
    await assert.rejects(collect(demoOrders({ orders: 2, firstOrderId: MAX, now })), RangeError)
  })
})
