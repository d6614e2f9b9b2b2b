import assert from 'node:assert/strict'
import { gzipSync } from 'node:zlib'
import { after, before, describe, it } from 'node:test'
import { bearer, expectError, forEachStore, startTestServer, type TestServer } from './support/harness.js'
import { parseExact, type WireOrder as Order } from './support/v2.js'

interface Event {
  id: string
  type: string
  order: Order
  previous?: Record<string, unknown>
}

const MERGE_PATCH = { 'content-type': 'application/merge-patch+json' }
const BIG_PET = 2n ** 53n + 1n

forEachStore('v2 updateOrder, ETags and preconditions', (kind) => {
  let server: TestServer
  let key: string

  before(async () => {
    server = await startTestServer(kind)
    key = await server.createKey({ scopes: ['orders:read', 'orders:write', 'orders:cancel'] })
  })
  after(() => server.close())

  /** A new pending order of its own for each test, placed through the API: version 1. */
  async function placed(body: object = { petId: 7, quantity: 2, shipDate: '2026-12-01T10:00:00Z' }): Promise<Order> {
    const response = await fetch(`${server.origin}/v2/store/orders`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const text = await response.text()
    assert.equal(response.status, 201, text)
    assert.equal(response.headers.get('etag'), '"1"')
    return parseExact<Order>(text)
  }

  function patch(id: string, body: string | object, headers: Record<string, string> = {}, secret = key): Promise<Response> {
    return fetch(`${server.origin}/v2/store/orders/${id}`, {
      method: 'PATCH',
      headers: { ...bearer(secret), ...MERGE_PATCH, ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    })
  }

  async function patched(id: string, body: string | object, headers: Record<string, string> = {}): Promise<{ order: Order; etag: string | null; text: string }> {
    const response = await patch(id, body, headers)
    const text = await response.text()
    assert.equal(response.status, 200, text)
    return { order: parseExact<Order>(text), etag: response.headers.get('etag'), text }
  }

  async function getOrder(
    id: string,
    headers: Record<string, string> = {},
    method = 'GET',
  ): Promise<{ status: number; text: string; etag: string | null; type: string | null; length: string | null }> {
    const response = await fetch(`${server.origin}/v2/store/orders/${id}`, { method, headers: { ...bearer(key), ...headers } })
    const { status } = response
    return { status, text: await response.text(), etag: response.headers.get('etag'), type: response.headers.get('content-type'), length: response.headers.get('content-length') }
  }

  /** Every event of order `id` in the feed, in feed order. */
  async function eventsOf(id: string): Promise<Event[]> {
    const events: Event[] = []
    let after: string | undefined
    for (;;) {
      const response = await fetch(`${server.origin}/v2/store/order-events?limit=1000${after === undefined ? '' : `&after=${after}`}`, { headers: bearer(key) })
      const page = parseExact<{ data: Event[]; nextCursor: string }>(await response.text())
      events.push(...page.data.filter((event) => event.order.id === id))
      if (page.data.length === 0) return events
      after = page.nextCursor
    }
  }

  /** The order and its events are as they were: what every refused request must leave. */
  async function unchanged(id: string, before: { text: string; events: number }): Promise<void> {
    assert.equal((await getOrder(id)).text, before.text, 'the order is unchanged')
    assert.equal((await eventsOf(id)).length, before.events, 'no event was written')
  }

  async function snapshot(id: string): Promise<{ text: string; events: number }> {
    return { text: (await getOrder(id)).text, events: (await eventsOf(id)).length }
  }

  it('changes a pending order: 200 with the order, its version one more, ETag, and an order.updated event with previous', async () => {
    const order = await placed()
    const { order: changed, etag, text } = await patched(order.id, `{"petId": ${BIG_PET}, "quantity": 5}`)
    assert.deepEqual(changed, { ...order, petId: BIG_PET.toString(), quantity: 5, version: 2 })
    assert.equal(etag, '"2"')
    assert.ok(text.includes(`"petId":${BIG_PET}`), 'petId exact past 2^53')
    const shown = await getOrder(order.id)
    assert.deepEqual([shown.text, shown.etag], [text, '"2"'], 'getOrder shows it as answered')
    const events = await eventsOf(order.id)
    assert.deepEqual(events.map((event) => event.type), ['order.created', 'order.updated'])
    assert.deepEqual(events[1]!.order, changed)
    assert.deepEqual(events[1]!.previous, { petId: '7', quantity: 2 })
  })

  it('removes the ship date with null, and its event says what it was', async () => {
    const order = await placed()
    const { order: changed } = await patched(order.id, { shipDate: null })
    assert.equal(changed.shipDate, undefined)
    assert.equal(changed.version, 2)
    assert.deepEqual((await eventsOf(order.id))[1]!.previous, { shipDate: '2026-12-01T10:00:00.000Z' })
    // Set again, in another time zone: stored in UTC; the previous value was none (null).
    const { order: again } = await patched(order.id, { shipDate: '2026-12-24T18:00:00+01:00' })
    assert.equal(again.shipDate, '2026-12-24T17:00:00.000Z')
    assert.deepEqual((await eventsOf(order.id))[2]!.previous, { shipDate: null })
  })

  it('merges metadata key by key: a string adds or replaces, null removes, the others stay in their order', async () => {
    const order = await placed({ petId: 7, quantity: 1, metadata: { customer: 'c-1042', channel: 'web' } })
    assert.deepEqual(order.metadata, { customer: 'c-1042', channel: 'web' })
    const { order: changed, text } = await patched(order.id, { metadata: { channel: 'phone', note: 'ring twice', customer: null } })
    assert.deepEqual(changed.metadata, { channel: 'phone', note: 'ring twice' })
    assert.ok(text.endsWith('"metadata":{"channel":"phone","note":"ring twice"}}'), text)
    assert.deepEqual((await eventsOf(order.id))[1]!.previous, { metadata: { customer: 'c-1042', channel: 'web' } })
    // Every key removed: no metadata is shown at all, and the previous metadata is whole.
    const { order: emptied, text: emptiedText } = await patched(order.id, { metadata: { channel: null, note: null } })
    assert.equal(emptied.metadata, undefined)
    assert.ok(!emptiedText.includes('metadata'), emptiedText)
    assert.deepEqual((await eventsOf(order.id))[2]!.previous, { metadata: { channel: 'phone', note: 'ring twice' } })
    // And from none: previous metadata is null.
    await patched(order.id, { metadata: { a: '1' } })
    assert.deepEqual((await eventsOf(order.id))[3]!.previous, { metadata: null })
  })

  it('removes every metadata key with "metadata": null (RFC 7396), in any state; again, it is no change', async () => {
    const order = await placed({ petId: 7, quantity: 1, metadata: { customer: 'c-77', channel: 'web' } })
    assert.equal((await fetch(`${server.origin}/v2/store/orders/${order.id}/ship`, { method: 'POST', headers: bearer(key) })).status, 200)
    const { order: cleared, text, etag } = await patched(order.id, '{"metadata": null}', { 'if-match': '"2"' })
    assert.deepEqual([cleared.status, cleared.version, cleared.metadata, etag], ['shipped', 3, undefined, '"3"'])
    assert.ok(!text.includes('metadata'), text)
    const events = await eventsOf(order.id)
    assert.deepEqual([events.length, events[2]!.type, events[2]!.previous], [3, 'order.updated', { metadata: { customer: 'c-77', channel: 'web' } }])
    const filtered = await fetch(`${server.origin}/v2/store/orders?metadata[customer]=c-77`, { headers: bearer(key) })
    assert.ok(!(await filtered.text()).includes(`"id":${order.id},`), 'the index no longer finds it')
    const before = await snapshot(order.id)
    const again = await patched(order.id, '{"metadata": null}')
    assert.deepEqual([again.order.version, again.etag], [3, '"3"'])
    await unchanged(order.id, before)
  })

  it('keeps __proto__ and constructor as plain metadata keys', async () => {
    const order = await placed({ petId: 7, quantity: 1 })
    const { order: changed, text } = await patched(order.id, '{"metadata": {"__proto__": "p", "constructor": "c", "toString": "t"}}')
    assert.ok(text.includes('"metadata":{"__proto__":"p","constructor":"c","toString":"t"}'), text)
    assert.deepEqual(Object.keys(changed.metadata!), ['__proto__', 'constructor', 'toString'])
    assert.equal((await getOrder(order.id)).text, text)
    const { text: removed } = await patched(order.id, '{"metadata": {"__proto__": null}}')
    assert.ok(removed.includes('"metadata":{"constructor":"c","toString":"t"}'), removed)
  })

  it('answers a patch that changes nothing with the order as it is: no write, no event, the same version and ETag', async () => {
    const order = await placed({ petId: 7, quantity: 2, shipDate: '2026-12-01T10:00:00Z', metadata: { a: '1' } })
    const before = await snapshot(order.id)
    for (const body of ['{}', '{"quantity": 2}', '{"petId": 7, "metadata": {"a": "1", "b": null}}', '{"shipDate": "2026-12-01T11:00:00+01:00"}']) {
      const response = await patch(order.id, body)
      assert.equal(response.status, 200, body)
      assert.equal(response.headers.get('etag'), '"1"', body)
      assert.equal(await response.text(), before.text, body)
    }
    await unchanged(order.id, before)
  })

  it('changes petId, quantity and shipDate only while pending (409 order_not_pending), metadata in any state', async () => {
    const order = await placed()
    const shipped = await fetch(`${server.origin}/v2/store/orders/${order.id}/ship`, { method: 'POST', headers: bearer(key) })
    assert.equal(shipped.status, 200)
    assert.equal(shipped.headers.get('etag'), '"2"')
    let before = await snapshot(order.id)
    for (const body of [{ quantity: 3 }, { petId: 8 }, { shipDate: null }, { quantity: 3, metadata: { a: '1' } }]) {
      const body409 = await expectError(await patch(order.id, body), 409, 'order_not_pending')
      assert.match(body409.message as string, /metadata/, 'the message says what can still change')
      await unchanged(order.id, before)
    }
    // The same value is no change: a retried patch of a shipped order is answered, not refused.
    assert.equal((await patch(order.id, { quantity: 2 })).status, 200)
    const { order: tagged } = await patched(order.id, { metadata: { tracking: 'Z123' } })
    assert.deepEqual([tagged.status, tagged.version, tagged.metadata], ['shipped', 3, { tracking: 'Z123' }])
    // A cancelled order too.
    const other = await placed()
    assert.equal((await fetch(`${server.origin}/v2/store/orders/${other.id}/cancel`, { method: 'POST', headers: bearer(key) })).status, 200)
    before = await snapshot(other.id)
    await expectError(await patch(other.id, { quantity: 1 }), 409, 'order_not_pending')
    await unchanged(other.id, before)
    assert.equal((await patched(other.id, { metadata: { refund: 'r-9' } })).order.version, 3)
  })

  it('refuses any other member or a bad value with 400 invalid_body naming it, and writes nothing', async () => {
    const order = await placed({ petId: 7, quantity: 2, metadata: { a: '1' } })
    const before = await snapshot(order.id)
    const refused: [string, RegExp][] = [
      ['{"id": 5}', /"id"/],
      ['{"status": "shipped"}', /"status"/],
      ['{"complete": true}', /"complete"/],
      ['{"version": 3}', /"version"/],
      ['{"quantity": 0}', /"quantity"/],
      ['{"quantity": 1001}', /"quantity"/],
      ['{"quantity": "3"}', /"quantity"/],
      ['{"quantity": null}', /"quantity"/],
      ['{"petId": 0}', /"petId"/],
      ['{"petId": 9223372036854775808}', /"petId"/],
      ['{"shipDate": "tomorrow"}', /"shipDate"/],
      ['{"metadata": "a=1"}', /"metadata"/],
      ['{"metadata": {"a": 1}}', /metadata value of "a" must be a string \(or null, to remove the key\)/],
      ['{"metadata": {"a": {"b": "c"}}}', /metadata value of "a" must be a string/],
      ['{"metadata": {"a": ["b"]}}', /metadata value of "a" must be a string/],
      ['{"metadata": {"a b": "c"}}', /metadata key "a b"/],
      ['{"metadata": {"": "c"}}', /metadata key ""/],
      [`{"metadata": {"${'k'.repeat(41)}": "c"}}`, /metadata key "k{41}" must be 1 to 40 characters/],
      [`{"metadata": {"a": "${'v'.repeat(501)}"}}`, /metadata value of "a" must be at most 500 characters/],
      ['{"metadata": {"a": "\\ud800"}}', /lone surrogate/],
      ['{"metadata": {"a": "x\\u0000y"}}', /U\+0000/],
      [`{"metadata": {${Array.from({ length: 51 }, (_, i) => `"k${i}": "v"`).join(', ')}}}`, /at most 50 keys; got 51/],
      ['{"quantity": 3, "quantity": 4}', /quantity/],
      ['{"metadata": {"a": "1", "a": "2"}}', /"a"/],
      ['[]', /JSON object/],
      ['null', /JSON object/],
      ['"quantity=3"', /JSON object; got string/],
      ['5', /JSON object; got a number/],
      ['{"quantity": 3', /not valid JSON/],
    ]
    for (const [body, message] of refused) {
      const error = await expectError(await patch(order.id, body), 400, 'invalid_body')
      assert.match(error.message as string, message, body)
    }
    await expectError(await patch(order.id, ''), 400, 'invalid_body')
    // A JSON string is JSON under either media type: 400, not 415.
    const asJson = await expectError(await patch(order.id, '"x"', { 'content-type': 'application/json' }), 400, 'invalid_body')
    assert.match(asJson.message as string, /JSON object; got string/)
    await unchanged(order.id, before)
  })

  it('takes 500 characters in a value, counted as characters, and 50 keys; refuses a merge that would make 51', async () => {
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`key-${i}`, '🐶'.repeat(500)]))
    const order = await placed({ petId: 7, quantity: 1, metadata: fifty })
    assert.equal(Object.keys(order.metadata!).length, 50)
    assert.equal(order.metadata!['key-0'], '🐶'.repeat(500))
    const before = await snapshot(order.id)
    const error = await expectError(await patch(order.id, { metadata: { 'key-50': 'one too many' } }), 400, 'invalid_body')
    assert.match(error.message as string, /at most 50 keys/)
    await unchanged(order.id, before)
    // One out, one in: still 50.
    const { order: swapped } = await patched(order.id, { metadata: { 'key-0': null, 'key-50': 'in' } })
    assert.equal(Object.keys(swapped.metadata!).length, 50)
    // The same 50 values escaped, as Python's json.dumps writes them (12 bytes an emoji): over 300 KB, still taken.
    const other = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`key-${i + 1}`, '🐱'.repeat(500)]))
    const escaped = JSON.stringify({ metadata: other }).replace(/[\u0080-\uffff]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`)
    assert.ok(escaped.length > 300_000, String(escaped.length))
    const { order: replaced } = await patched(order.id, escaped)
    assert.deepEqual([Object.keys(replaced.metadata!).length, replaced.metadata!['key-50']], [50, '🐱'.repeat(500)])
  })

  it('refuses a body of 1 MB (413), another media type (415) and a merge patch sent to any other write (415)', async () => {
    const order = await placed()
    const before = await snapshot(order.id)
    await expectError(await patch(order.id, JSON.stringify({ metadata: { a: 'x'.repeat(1_000_000) } })), 413, 'payload_too_large')
    await expectError(await patch(order.id, 'quantity=3', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type')
    await expectError(await patch(order.id, 'quantity 3', { 'content-type': 'text/plain' }), 415, 'unsupported_media_type')
    for (const body of ['{}', 'not JSON at all', '']) {
      // 415 before the text is parsed: whatever it holds, a merge patch is no other write's body.
      const ship = await fetch(`${server.origin}/v2/store/orders/${order.id}/ship`, { method: 'POST', headers: { ...bearer(key), ...MERGE_PATCH }, body })
      await expectError(ship, 415, 'unsupported_media_type')
    }
    await unchanged(order.id, before)
    // application/json is a merge patch too.
    assert.equal((await patch(order.id, { quantity: 4 }, { 'content-type': 'application/json; charset=utf-8' })).status, 200)
  })

  it('says which patch formats it takes: Accept-Patch on a 415 and on OPTIONS', async () => {
    const order = await placed()
    const before = await snapshot(order.id)
    const jsonPatch = await patch(order.id, [{ op: 'replace', path: '/quantity', value: 2 }], { 'content-type': 'application/json-patch+json' })
    assert.equal(jsonPatch.headers.get('accept-patch'), 'application/merge-patch+json, application/json')
    assert.match((await expectError(jsonPatch, 415, 'unsupported_media_type')).message as string, /JSON Merge Patch, sent with Content-Type: application\/merge-patch\+json/)
    await unchanged(order.id, before)
    const options = await fetch(`${server.origin}/v2/store/orders/${order.id}`, { method: 'OPTIONS' })
    assert.deepEqual([options.status, options.headers.get('accept-patch')], [204, 'application/merge-patch+json, application/json'])
    assert.match(options.headers.get('allow') ?? '', /PATCH/)
    // A path without PATCH says nothing of patches.
    const list = await fetch(`${server.origin}/v2/store/orders`, { method: 'OPTIONS' })
    assert.deepEqual([list.status, list.headers.get('accept-patch')], [204, null])
  })

  it('refuses a body that is not UTF-8, in another charset or a content coding, or nested too deeply, and writes nothing', async () => {
    const order = await placed()
    const before = await snapshot(order.id)
    const send = (body: Uint8Array | string, headers: Record<string, string> = {}): Promise<Response> =>
      fetch(`${server.origin}/v2/store/orders/${order.id}`, { method: 'PATCH', headers: { ...bearer(key), ...MERGE_PATCH, ...headers }, body })
    // ISO-8859-1 "été", and an overlong "/": never stored as U+FFFD.
    for (const bytes of [Buffer.from('{"metadata":{"city":"\xe9t\xe9"}}', 'latin1'), Buffer.from([...Buffer.from('{"metadata":{"p":"'), 0xc0, 0xaf, ...Buffer.from('"}}')])]) {
      assert.match((await expectError(await send(bytes), 400, 'invalid_body')).message as string, /not valid UTF-8/)
    }
    const latin1 = await send('{"quantity":5}', { 'content-type': 'application/merge-patch+json; charset=iso-8859-1' })
    assert.match((await expectError(latin1, 415, 'unsupported_media_type')).message as string, /charset=iso-8859-1/)
    const gzipped = await send(gzipSync('{"quantity":5}'), { 'content-encoding': 'gzip' })
    assert.equal(gzipped.headers.get('accept-encoding'), 'identity')
    await expectError(gzipped, 415, 'unsupported_media_type')
    // Labelled br but plain: refused all the same, not read as if uncompressed.
    await expectError(await send('{"quantity":5}', { 'content-encoding': 'br' }), 415, 'unsupported_media_type')
    const deep = await send('['.repeat(200_000) + ']'.repeat(200_000))
    assert.match((await expectError(deep, 400, 'invalid_body')).message as string, /nests arrays or objects too deeply/)
    await unchanged(order.id, before)
    // A byte order mark is dropped; "charset=UTF-8" and "identity" are UTF-8 and no coding.
    const marked = await send(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"quantity":5}')]), { 'content-type': 'application/merge-patch+json; charset="UTF-8"', 'content-encoding': 'identity' })
    assert.equal(marked.status, 200)
  })

  it('needs orders:write (403); a key without orders:read gets 204, no body, with the ETag', async () => {
    const order = await placed()
    const readOnly = await server.createKey({ scopes: ['orders:read'] })
    const writeOnly = await server.createKey({ scopes: ['orders:write'] })
    const before = await snapshot(order.id)
    await expectError(await patch(order.id, { quantity: 9 }, {}, readOnly), 403, 'insufficient_scope')
    await unchanged(order.id, before)
    const response = await patch(order.id, { quantity: 9 }, {}, writeOnly)
    assert.equal(response.status, 204)
    assert.equal(await response.text(), '')
    assert.equal(response.headers.get('etag'), '"2"')
    assert.equal(parseExact<Order>((await getOrder(order.id)).text).quantity, 9)
  })

  it('answers 404 for an order that does not exist, and 400 for an id that is not one', async () => {
    await expectError(await patch('987654321', { quantity: 1 }), 404, 'order_not_found')
    await expectError(await patch('9223372036854775808', { quantity: 1 }), 400, 'invalid_order_id')
    await expectError(await patch('abc', { quantity: 1 }), 400, 'invalid_order_id')
  })

  describe('If-Match', () => {
    it('changes the order only at the version it names: 412 precondition_failed naming the current one, nothing changed', async () => {
      const order = await placed()
      const { etag } = await patched(order.id, { quantity: 3 }, { 'if-match': '"1"' })
      assert.equal(etag, '"2"')
      const before = await snapshot(order.id)
      const stale = await patch(order.id, { quantity: 4 }, { 'if-match': '"1"' })
      assert.equal(stale.headers.get('etag'), '"2"', 'the 412 names the current version')
      const error = await expectError(stale, 412, 'precondition_failed')
      assert.match(error.message as string, /version 2/)
      await unchanged(order.id, before)
      // `*`: any version of an order that exists.
      assert.equal((await patched(order.id, { quantity: 4 }, { 'if-match': '*' })).order.version, 3)
      // A no-op patch with a stale version is still refused: it names a state that is gone.
      await expectError(await patch(order.id, {}, { 'if-match': '"2"' }), 412, 'precondition_failed')
    })

    it('takes a list of ETags (any of them), and judges a weak or unknown tag as never matching: 412, not 400', async () => {
      const order = await placed()
      await patched(order.id, { quantity: 3 }) // version 2
      // A list holds when any tag is the current one; empty elements are nothing (RFC 9110 §5.6.1).
      assert.equal((await patched(order.id, { quantity: 4 }, { 'if-match': '"1", "2"' })).order.version, 3)
      assert.equal((await patched(order.id, { quantity: 5 }, { 'if-match': ' , "3",' })).order.version, 4)
      const before = await snapshot(order.id)
      // Strong comparison: W/"4" never matches; a tag this API never gave matches no order.
      for (const value of ['W/"4"', '"1", "2"', '"abc"', '""', '"0"', '"04"', '"9999999999"', '"2147483648"']) {
        const refused = await patch(order.id, { quantity: 6 }, { 'if-match': value })
        assert.equal(refused.headers.get('etag'), '"4"', value)
        await expectError(refused, 412, 'precondition_failed')
      }
      await unchanged(order.id, before)
    })

    it('refuses an If-Match that is not * or a list of ETags with 400 invalid_if_match, and changes nothing', async () => {
      const order = await placed()
      const before = await snapshot(order.id)
      for (const value of ['1', '"1', 'W/1', '"1" "2"', '*, "1"', 'W/ "1"', '"a"b"']) {
        await expectError(await patch(order.id, { quantity: 5 }, { 'if-match': value }), 400, 'invalid_if_match')
      }
      await unchanged(order.id, before)
    })

    it('holds for ship, complete and cancel: a stale version changes nothing; the current one goes through', async () => {
      const order = await placed()
      await patched(order.id, { metadata: { a: '1' } }) // version 2
      const post = (action: string, version: string): Promise<Response> =>
        fetch(`${server.origin}/v2/store/orders/${order.id}/${action}`, { method: 'POST', headers: { ...bearer(key), 'if-match': version } })
      const before = await snapshot(order.id)
      for (const action of ['ship', 'complete', 'cancel']) await expectError(await post(action, '"1"'), 412, 'precondition_failed')
      await unchanged(order.id, before)
      const shipped = await post('ship', '"2"')
      assert.deepEqual([shipped.status, shipped.headers.get('etag')], [200, '"3"'])
      await expectError(await post('complete', '"2"'), 412, 'precondition_failed')
      const completed = await post('complete', '"3"')
      assert.deepEqual([completed.status, completed.headers.get('etag')], [200, '"4"'])
      // The version is checked before the state: a cancel of the shipped order at its version is 409.
      await expectError(await post('cancel', '"4"'), 409, 'order_already_shipped')
      await expectError(await post('cancel', '"3"'), 412, 'precondition_failed')
    })
  })

  describe('If-None-Match on writes', () => {
    it('refuses a write to the version it names, or to any order with *: 412, nothing changed; another version goes through', async () => {
      const order = await placed()
      const before = await snapshot(order.id)
      const named = await patch(order.id, { quantity: 5 }, { 'if-none-match': 'W/"1"' })
      assert.equal(named.headers.get('etag'), '"1"')
      assert.match((await expectError(named, 412, 'precondition_failed')).message as string, /If-None-Match names that version/)
      assert.match((await expectError(await patch(order.id, { quantity: 5 }, { 'if-none-match': '*' }), 412, 'precondition_failed')).message as string, /If-None-Match: \*/)
      await unchanged(order.id, before)
      assert.equal((await patched(order.id, { quantity: 5 }, { 'if-none-match': '"7", "8"' })).order.version, 2)
      // If-Match is judged first, then If-None-Match (RFC 9110 §13.2.2); both must hold.
      await expectError(await patch(order.id, { quantity: 6 }, { 'if-match': '"2"', 'if-none-match': '"2"' }), 412, 'precondition_failed')
      assert.equal((await patched(order.id, { quantity: 6 }, { 'if-match': '"2"', 'if-none-match': '"1"' })).order.version, 3)
      // Ship, complete and cancel alike; an order that does not exist is 404 first.
      for (const action of ['ship', 'complete', 'cancel']) {
        const response = await fetch(`${server.origin}/v2/store/orders/${order.id}/${action}`, { method: 'POST', headers: { ...bearer(key), 'if-none-match': '"3"' } })
        await expectError(response, 412, 'precondition_failed')
        const missing = await fetch(`${server.origin}/v2/store/orders/987654321/${action}`, { method: 'POST', headers: { ...bearer(key), 'if-none-match': '*' } })
        await expectError(missing, 404, 'order_not_found')
      }
      assert.equal((await getOrder(order.id)).etag, '"3"')
    })

    it('refuses an If-None-Match that is not * or a list of ETags with 400 invalid_if_none_match, and changes nothing', async () => {
      const order = await placed()
      const before = await snapshot(order.id)
      for (const value of ['1', 'garbage', '"1" "2"']) {
        await expectError(await patch(order.id, { quantity: 5 }, { 'if-none-match': value }), 400, 'invalid_if_none_match')
      }
      await unchanged(order.id, before)
    })
  })

  describe('If-None-Match on getOrder', () => {
    it('answers 304 with the ETag and no body while the order is at that version, 200 once it changed', async () => {
      const order = await placed()
      const first = await getOrder(order.id)
      assert.deepEqual([first.status, first.etag], [200, '"1"'])
      for (const value of ['"1"', 'W/"1"', '"7", "1"', '*']) {
        const held = await getOrder(order.id, { 'if-none-match': value })
        assert.deepEqual([held.status, held.text, held.etag], [304, '', '"1"'], value)
        // No body: so neither a type nor a length the 200 would not have (RFC 9110 §8.6).
        assert.deepEqual([held.type, held.length], [null, null], value)
        // HEAD alike: a Content-Length only as the 200's, so none (Fastify's HEAD route would write 0).
        const head = await getOrder(order.id, { 'if-none-match': value }, 'HEAD')
        assert.deepEqual([head.status, head.text, head.etag, head.type, head.length], [304, '', '"1"', null, null], `HEAD ${value}`)
      }
      const head = await getOrder(order.id, {}, 'HEAD')
      assert.deepEqual([head.status, head.text, head.etag, head.length], [200, '', '"1"', String(Buffer.byteLength(first.text))])
      await patched(order.id, { quantity: 6 })
      const changed = await getOrder(order.id, { 'if-none-match': '"1"' })
      assert.deepEqual([changed.status, changed.etag], [200, '"2"'])
      assert.equal(parseExact<Order>(changed.text).quantity, 6)
      assert.equal((await getOrder(order.id, { 'if-none-match': 'garbage' })).status, 400)
    })

    it('judges If-Match first: 412 naming the current version when it names another, before any 304', async () => {
      const order = await placed()
      for (const headers of [{ 'if-match': '"7"' }, { 'if-match': 'W/"1"' }, { 'if-match': '"7"', 'if-none-match': '"1"' }] as Record<string, string>[]) {
        const refused = await getOrder(order.id, headers)
        assert.deepEqual([refused.status, refused.etag], [412, '"1"'], JSON.stringify(headers))
        assert.equal((JSON.parse(refused.text) as { code: string }).code, 'precondition_failed')
      }
      assert.equal((await getOrder(order.id, { 'if-match': '"1"', 'if-none-match': '"1"' })).status, 304)
      assert.equal((await getOrder(order.id, { 'if-match': '"5", "1"' })).status, 200)
      assert.equal((await getOrder(order.id, { 'if-match': 'nope' })).status, 400)
    })
  })

  it('shows v1 the change and nothing new: the same fields as ever, never the list as it was before', async () => {
    const order = await placed({ petId: 7, quantity: 2, shipDate: '2026-12-01T10:00:00Z' })
    const v1 = async (): Promise<{ text: string; etag: string | null }> => {
      const response = await fetch(`${server.origin}/v1/store/orders`, { headers: bearer(key) })
      return { text: await response.text(), etag: response.headers.get('etag') }
    }
    const before = await v1()
    assert.ok(before.text.includes(`{"id":${order.id},"petId":7,"quantity":2,"shipDate":"2026-12-01T10:00:00.000Z","complete":false}`), before.text)
    await patched(order.id, { quantity: 8, shipDate: null, metadata: { a: '1' } })
    const afterChange = await v1()
    assert.notEqual(afterChange.etag, before.etag, 'a new list version')
    assert.ok(afterChange.text.includes(`{"id":${order.id},"petId":7,"quantity":8,"complete":false}`), afterChange.text)
    assert.ok(!afterChange.text.includes('metadata') && !afterChange.text.includes('version'), 'v1 shows no new field')
    const single = await fetch(`${server.origin}/v1/store/orders/${order.id}`, { headers: bearer(key) })
    if (single.status === 200) assert.equal(await single.text(), `{"id":${order.id},"petId":7,"quantity":8,"complete":false}`)
  })

  it('places with metadata: shown by getOrder, the list and the order.created event', async () => {
    const order = await placed({ petId: 7, quantity: 1, metadata: { customer: 'c-9', 'cart.id': 'k:1' } })
    assert.deepEqual(order.metadata, { customer: 'c-9', 'cart.id': 'k:1' })
    const shown = parseExact<Order>((await getOrder(order.id)).text)
    assert.deepEqual(shown.metadata, order.metadata)
    const page = await fetch(`${server.origin}/v2/store/orders?limit=1000`, { headers: bearer(key) })
    assert.ok((await page.text()).includes(`"id":${order.id},"complete":false,"status":"pending","version":1,"petId":7,"quantity":1,"metadata":{"customer":"c-9","cart.id":"k:1"}}`))
    assert.deepEqual((await eventsOf(order.id))[0]!.order.metadata, order.metadata)
    // placeOrder refuses bad metadata as updateOrder does, and places nothing.
    const count = (await eventsOf(order.id)).length
    const bad = await fetch(`${server.origin}/v2/store/orders`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: '{"petId": 7, "quantity": 1, "metadata": {"a": null}}',
    })
    await expectError(bad, 400, 'invalid_body')
    assert.equal((await eventsOf(order.id)).length, count)
  })

  it('replays a keyed place with metadata given in another key order, and refuses other metadata under the key', async () => {
    const send = (body: string): Promise<Response> =>
      fetch(`${server.origin}/v2/store/orders`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json', 'idempotency-key': `meta-${kind}` }, body })
    const first = await send('{"petId": 7, "quantity": 1, "metadata": {"a": "1", "b": "2"}}')
    assert.equal(first.status, 201)
    const again = await send('{"metadata": {"b": "2", "a": "1"}, "quantity": 1, "petId": 7}')
    assert.deepEqual([again.status, again.headers.get('idempotent-replayed')], [201, 'true'])
    assert.equal(await again.text(), await first.text())
    await expectError(await send('{"petId": 7, "quantity": 1, "metadata": {"a": "1", "b": "3"}}'), 422, 'idempotency_key_reused')
  })
})
