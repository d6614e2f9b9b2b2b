/**
 * Every JSON the README and docs/*.md show as the service's output (```json blocks, the `# ` answer
 * lines of shell blocks, the bodies in text and http blocks) against real responses of a real
 * server: each object's fields in the order the service writes them, none it never writes, none
 * missing that it always writes, each value of the kind it sends. `…` in a sample stands for values
 * or fields left out. Which object is which is told by its fields (an event has `occurredAt`, an
 * error `code`, …); an object no rule recognises fails the test, so a new kind of sample gets a rule.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { after, before, it } from 'node:test'
import { bearer, forEachStore, startTestServer, type TestServer } from './support/harness.js'

const ROOT = new URL('../', import.meta.url)
const DOCS = ['README.md', ...readdirSync(new URL('docs/', ROOT)).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)]

type Kind = 'orderV1' | 'orderV2' | 'error' | 'event' | 'page' | 'endpoint' | 'webhookBody' | 'pingData' | 'pet'
type ValueKind = 'string' | 'number' | 'boolean' | 'null' | 'object' | 'array' | 'unknown'

/** An object as a sample shows it: its fields in order, and whether `…` stands for some of them. */
interface SampleObject {
  fields: { key: string; value: SampleValue }[]
  partial: boolean
}
type SampleValue = { kind: 'object'; object: SampleObject } | { kind: 'array'; items: SampleValue[] } | { kind: Exclude<ValueKind, 'object' | 'array'> }

// --- Reading samples: a tolerant JSON reader, where `…` (or any other text) is a gap. ---

type Token = { t: 'punct'; v: string } | { t: 'string'; v: string } | { t: 'literal'; v: string } | { t: 'gap' }

function tokens(text: string): Token[] {
  const out: Token[] = []
  for (let i = 0; i < text.length; ) {
    const c = text[i]!
    if (/\s/.test(c)) i++
    else if ('{}[]:,'.includes(c)) {
      out.push({ t: 'punct', v: c })
      i++
    } else if (c === '"') {
      let j = i + 1
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1
      out.push({ t: 'string', v: text.slice(i + 1, j) })
      i = j + 1
    } else {
      const literal = /^(-?\d[\d.eE+-]*|true|false|null)(?![\w…])/.exec(text.slice(i))
      if (literal !== null) {
        out.push({ t: 'literal', v: literal[1]! })
        i += literal[1]!.length
      } else {
        // `…`, a word of prose: a gap, merged with the gap before it.
        if (out.at(-1)?.t !== 'gap') out.push({ t: 'gap' })
        i++
      }
    }
  }
  return out
}

/** The top-level objects and arrays of `text`, read leniently. */
function samplesIn(text: string): SampleValue[] {
  const list = tokens(text)
  let at = 0
  const isPunct = (v: string): boolean => list[at]?.t === 'punct' && (list[at] as { v: string }).v === v
  const value = (): SampleValue => {
    const token = list[at]
    if (token === undefined) return { kind: 'unknown' }
    if (token.t === 'punct' && token.v === '{') {
      at++
      const object: SampleObject = { fields: [], partial: false }
      while (at < list.length && !isPunct('}')) {
        const current = list[at]!
        if (current.t === 'string' && list[at + 1]?.t === 'punct' && (list[at + 1] as { v: string }).v === ':') {
          at += 2
          object.fields.push({ key: current.v, value: value() })
        } else {
          if (current.t === 'gap') object.partial = true
          at++
        }
      }
      at++
      return { kind: 'object', object }
    }
    if (token.t === 'punct' && token.v === '[') {
      at++
      const items: SampleValue[] = []
      while (at < list.length && !isPunct(']')) {
        const current = list[at]!
        if (current.t === 'punct' && (current.v === '{' || current.v === '[')) items.push(value())
        else at++
      }
      at++
      return { kind: 'array', items }
    }
    at++
    if (token.t === 'string') return { kind: 'string' }
    if (token.t === 'literal') return { kind: token.v === 'null' ? 'null' : token.v === 'true' || token.v === 'false' ? 'boolean' : 'number' }
    return { kind: 'unknown' }
  }
  const found: SampleValue[] = []
  while (at < list.length) {
    if (isPunct('{') || isPunct('[')) found.push(value())
    else at++
  }
  return found
}

interface Sample {
  where: string
  text: string
}

/** The service's output as the docs show it, each with its file and line. */
function docSamples(): Sample[] {
  const samples: Sample[] = []
  for (const path of DOCS) {
    const doc = readFileSync(new URL(path, ROOT), 'utf8')
    for (const match of doc.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm)) {
      const [, language, body] = match as unknown as [string, string, string]
      const line = doc.slice(0, match.index).split('\n').length
      if (language === 'json' || language === 'text' || language === 'http') {
        if (/[{[]"/.test(body)) samples.push({ where: `${path}:${line + 1}`, text: body })
      } else if (language === 'sh') {
        // The lines after a command that show its answer; request bodies (-d) are not samples.
        body.split('\n').forEach((text, i) => {
          if (/^# .*[{[]"/.test(text)) samples.push({ where: `${path}:${line + 1 + i}`, text: text.slice(2) })
        })
      }
    }
  }
  return samples
}

// --- What the service writes. ---

/** The fields of a real JSON text (as received: the order of its fields is the order sent). */
function realValue(value: unknown): SampleValue {
  if (Array.isArray(value)) return { kind: 'array', items: value.map(realValue) }
  if (value === null) return { kind: 'null' }
  if (typeof value === 'object') {
    return { kind: 'object', object: { fields: Object.entries(value).map(([key, field]) => ({ key, value: realValue(field) })), partial: false } }
  }
  return { kind: typeof value as 'string' | 'number' | 'boolean' }
}

/**
 * What an object is, from its fields and where it is (`within`: the kind of object holding it and
 * under which field). Undefined: no rule knows it; null: not checked (the OpenAPI document).
 */
function kindOf(object: SampleObject, within?: { kind: Kind; key: string }): Kind | null | undefined {
  const keys = new Set(object.fields.map((field) => field.key))
  if (keys.has('openapi')) return null
  // Free-form: an order's metadata (the store's own keys), and an update's `previous` (the fields it changed).
  if ((within?.kind === 'orderV2' && within.key === 'metadata') || (within?.kind === 'event' && within.key === 'previous')) return null
  if (within?.kind === 'event' && within.key === 'order') return 'orderV2'
  if (within?.kind === 'webhookBody' && within.key === 'data') return keys.has('endpointId') ? 'pingData' : 'event'
  if (keys.has('code')) return 'error'
  if (keys.has('timestamp')) return 'webhookBody'
  if (keys.has('occurredAt')) return 'event'
  if (keys.has('url') || keys.has('eventTypes') || keys.has('secret')) return 'endpoint'
  if (keys.has('nextCursor') || (within === undefined && keys.has('data'))) return 'page'
  if (keys.has('endpointId')) return 'pingData'
  if (keys.has('name') || keys.has('tag')) return 'pet'
  if (within?.kind === 'page') return keys.has('type') ? 'event' : 'orderV2'
  if (['id', 'petId', 'quantity', 'shipDate', 'complete'].some((key) => keys.has(key))) return keys.has('status') ? 'orderV2' : 'orderV1'
  return undefined
}

/** The objects inside `value` with their kinds, depth first. */
function* objects(value: SampleValue, within?: { kind: Kind; key: string }): Generator<{ object: SampleObject; kind: Kind | undefined }> {
  if (value.kind === 'array') {
    for (const item of value.items) yield* objects(item, within)
    return
  }
  if (value.kind !== 'object') return
  const kind = kindOf(value.object, within)
  if (kind === null) return
  yield { object: value.object, kind }
  if (kind === undefined) return
  for (const field of value.object.fields) yield* objects(field.value, { kind, key: field.key })
}

/**
 * What the service writes of one kind: which field comes before which (from every real object of
 * it), the fields in that order, those always there, and each value's kind.
 */
interface Written {
  next: Map<string, Set<string>>
  order: string[]
  always: Set<string>
  kinds: Map<string, Set<ValueKind>>
}

function written(samples: SampleValue[]): Map<Kind, Written> {
  const byKind = new Map<Kind, Written>()
  for (const sample of samples) {
    for (const { object, kind } of objects(sample)) {
      assert.ok(kind !== undefined, `a real response no rule recognises: ${JSON.stringify(object)}`)
      const keys = object.fields.map((field) => field.key)
      let known = byKind.get(kind)
      if (known === undefined) byKind.set(kind, (known = { next: new Map(), order: [], always: new Set(keys), kinds: new Map() }))
      for (const key of known.always) if (!keys.includes(key)) known.always.delete(key)
      keys.forEach((key, i) => {
        if (!known.next.has(key)) known.next.set(key, new Set())
        if (i > 0) known.next.get(keys[i - 1]!)!.add(key)
      })
      for (const { key, value } of object.fields) {
        if (!known.kinds.has(key)) known.kinds.set(key, new Set())
        known.kinds.get(key)!.add(value.kind)
      }
    }
  }
  for (const known of byKind.values()) known.order = inOrder(known.next)
  return byKind
}

/** Whether `to` comes after `from` in every object that has both (it follows it, directly or not). */
function follows(next: Map<string, Set<string>>, from: string, to: string): boolean {
  const seen = new Set<string>()
  const stack = [from]
  while (stack.length > 0) {
    for (const key of next.get(stack.pop()!) ?? []) {
      if (key === to) return true
      if (seen.has(key)) continue
      seen.add(key)
      stack.push(key)
    }
  }
  return false
}

/** The fields in an order every object agrees with (for messages). */
function inOrder(next: Map<string, Set<string>>): string[] {
  const order: string[] = []
  const remaining = [...next.keys()]
  while (remaining.length > 0) {
    const first = remaining.find((key) => !remaining.some((other) => other !== key && follows(next, other, key))) ?? remaining[0]!
    order.push(first)
    remaining.splice(remaining.indexOf(first), 1)
  }
  return order
}

/** What is wrong with a sample's object against what the service writes of its kind, if anything. */
function problem(object: SampleObject, kind: Kind, real: Written): string | undefined {
  const keys = object.fields.map((field) => field.key)
  const unknown = keys.filter((key) => !real.next.has(key))
  if (unknown.length > 0) return `${kind} has no field ${unknown.join(', ')} (the service writes ${real.order.join(', ')})`
  if (keys.some((key, i) => keys.slice(0, i).some((before) => follows(real.next, key, before)))) {
    return `${kind}'s fields are ${keys.join(', ')}; the service writes them in the order ${real.order.filter((key) => keys.includes(key)).join(', ')}`
  }
  if (!object.partial) {
    const missing = [...real.always].filter((key) => !keys.includes(key))
    if (missing.length > 0) return `${kind} lacks ${missing.join(', ')}, which the service always writes (or show \`…\` for what is left out)`
  }
  for (const { key, value } of object.fields) {
    const kinds = real.kinds.get(key)!
    if (value.kind !== 'unknown' && !kinds.has(value.kind)) return `${kind}'s ${key} is a ${value.kind}; the service writes a ${[...kinds].join(' or ')}`
  }
  return undefined
}

forEachStore('JSON samples in README.md and docs/*.md', (kind) => {
  let server: TestServer
  let receiver: Server
  const real: string[] = []

  before(async () => {
    receiver = createServer((request, response) => {
      let body = ''
      request.on('data', (chunk: Buffer) => (body += chunk.toString()))
      request.on('end', () => {
        real.push(body)
        response.writeHead(204).end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    server = await startTestServer(kind, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', PETS_SUNSET_AT: '2100-01-01T00:00:00Z' } })
    const key = await server.createKey()
    await server.importOrders([{ id: 1n, petId: 7n, quantity: 2, shipDate: '2026-11-25T10:00:00.000Z', status: 'shipped', complete: true }, { id: 2n }])
    await server.store.pets.import((async function* () {
      yield { id: 7n, name: 'Rex', tag: 'dog' }
    })())
    /** The request's answer, kept as a real response unless `keep` is false; any status but `status` (a 2xx by default) fails. */
    const call = async (method: string, path: string, body?: object, { keep = true, status = 0 } = {}): Promise<string> => {
      const response = await fetch(`${server.origin}${path}`, {
        method,
        headers: { ...bearer(key), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      const text = await response.text()
      assert.ok(status === 0 ? response.ok : response.status === status, `${method} ${path}: ${response.status} ${text}`)
      if (keep && text !== '') real.push(text)
      return text
    }
    const idOf = (text: string): string => /^\{"id":(\d+)/.exec(text)?.[1] ?? assert.fail(text)
    // Every field an order can have: one shipped and completed, one cancelled with a reason.
    const placed = idOf(await call('POST', '/v2/store/orders', { petId: 7, quantity: 2, shipDate: '2026-12-01T10:00:00Z' }))
    await call('POST', `/v2/store/orders/${placed}/ship`)
    await call('POST', `/v2/store/orders/${placed}/complete`)
    const cancelled = idOf(await call('POST', '/v2/store/orders', { petId: 4, quantity: 1, shipDate: '2026-12-02T10:00:00Z' }))
    await call('POST', `/v2/store/orders/${cancelled}/cancel`, { reason: 'customer_request' })
    // One changed: metadata, and an order.updated event with `previous`.
    const changed = idOf(await call('POST', '/v2/store/orders', { petId: 7, quantity: 1, metadata: { customer: 'c-1042' } }))
    await call('PATCH', `/v2/store/orders/${changed}`, { quantity: 2, metadata: { cart: 'k-77' } })
    await call('GET', '/v1/store/orders')
    await call('GET', '/v2/store/orders?status=pending,shipped,cancelled')
    await call('GET', '/v2/store/order-events')
    await call('GET', '/v1/pets/7')
    await call('DELETE', '/v1/store/orders/1', undefined, { status: 409 }) // shipped: an error body
    const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`
    const endpoint = idOf(await call('POST', '/v2/webhook-endpoints', { url, description: 'Warehouse dispatch' }))
    await call('POST', '/v2/webhook-endpoints', { url })
    await call('PATCH', `/v2/webhook-endpoints/${endpoint}`, { enabled: false })
    await call('POST', `/v2/webhook-endpoints/${endpoint}/ping`, undefined, { keep: false }) // its body is received above
    await call('GET', '/v2/store/order-events?limit=1').then((page) => {
      // An event delivery's body: Standard Webhooks' envelope around the event (signing.ts).
      const event = /^\{"data":\[(.*)\],"nextCursor"/.exec(page)?.[1] ?? assert.fail(page)
      const { type, occurredAt } = JSON.parse(event) as { type: string; occurredAt: string }
      real.push(`{"type":${JSON.stringify(type)},"timestamp":${JSON.stringify(occurredAt)},"data":${event}}`)
    })
  })

  after(() => {
    receiver.closeAllConnections()
    receiver.close()
  })

  it('shows each object with the fields the service writes, in its order', () => {
    const reference = written(real.map((text) => realValue(JSON.parse(text))))
    for (const expected of ['orderV1', 'orderV2', 'error', 'event', 'page', 'endpoint', 'webhookBody', 'pingData', 'pet'] as const) {
      assert.ok(reference.has(expected), `no real ${expected} was read`)
    }
    const problems: string[] = []
    let checked = 0
    for (const { where, text } of docSamples()) {
      for (const sample of samplesIn(text)) {
        for (const { object, kind } of objects(sample)) {
          checked++
          const shown = object.fields.map((field) => field.key).join(',')
          if (kind === undefined) problems.push(`${where}: an object no rule of this test recognises ({${shown}})`)
          else {
            const found = problem(object, kind, reference.get(kind)!)
            if (found !== undefined) problems.push(`${where}: ${found}`)
          }
        }
      }
    }
    assert.ok(checked >= 50, `only ${checked} objects found in the docs`)
    assert.deepEqual(problems, [], 'samples that differ from what the service sends')
  })

  it('finds what a drifted sample gets wrong', () => {
    const reference = written(real.map((text) => realValue(JSON.parse(text))))
    const check = (text: string): (string | undefined)[] =>
      samplesIn(text).flatMap((sample) => [...objects(sample)].map(({ object, kind }) => (kind === undefined ? 'unknown' : problem(object, kind, reference.get(kind)!))))
    // v1's field order in an event's order, a field the service never writes, one left out without `…`.
    assert.match(check('{"id":"1","type":"order.created","occurredAt":"…","order":{"id":1,"petId":7,"quantity":1,"complete":false,"status":"pending"}}')[1]!, /in the order id, complete, status, petId, quantity/)
    assert.match(check('{"id":1,"petId":7,"note":"x","complete":false}')[0]!, /has no field note/)
    assert.match(check('{"id":1,"complete":false,"petId":7}')[0]!, /orderV1's fields are|lacks/)
    assert.match(check('{"code":"x","message":"y"}')[0]!, /lacks status/)
    assert.match(check('{"data":[{"id":1,"status":"pending"}],"nextCursor":7}')[0]!, /nextCursor is a number/)
    assert.deepEqual(check('{"id":1,…,"status":"pending","shipDate":"…"}'), [undefined], '`…` stands for the fields left out')
  })
})
