/**
 * docs/webhooks.md against the service: its local quick start run as written (the settings, the
 * receiver, the CLI and curl lines) on `serve --demo`, what `npm start` runs; then each payload it
 * shows compared with a real delivery of its type, field by field in the order sent.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from 'node:test'
import { LosslessNumber, parse } from 'lossless-json'
import { Webhook } from 'standardwebhooks'
import { ORDER_EVENT_TYPES } from '../src/domain/order-events.js'
import { startDemo } from './support/demo.js'
import { bearer } from './support/harness.js'
import { BIN, freePort } from './support/server-process.js'

const DOC = readFileSync(new URL('../docs/webhooks.md', import.meta.url), 'utf8')
const hasCurl = spawnSync('curl', ['--version']).status === 0

/** The text of the section under `## title`, up to the next `## `. */
function section(title: string): string {
  const start = DOC.indexOf(`\n## ${title}\n`)
  assert.ok(start !== -1, `docs/webhooks.md has no section "${title}"`)
  const end = DOC.indexOf('\n## ', start + 1)
  return DOC.slice(start, end === -1 ? undefined : end)
}

/** The fenced blocks of `language` in `text`, in order. */
function blocks(text: string, language: string): string[] {
  return [...text.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((match) => match[1]!)
}

/** `…` in the doc stands for any text. */
function pattern(expected: string): RegExp {
  return new RegExp(`^${expected.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*')}$`)
}

/** Each field of a JSON body as `path:kind`, in the order of the text (lossless: numbers stay text). */
function shape(value: unknown, path = ''): string[] {
  if (value instanceof LosslessNumber) return [`${path}:number`]
  if (value !== null && typeof value === 'object') {
    return [`${path}:object`, ...Object.entries(value).flatMap(([key, field]) => shape(field, path === '' ? key : `${path}.${key}`))]
  }
  return [`${path}:${value === null ? 'null' : typeof value}`]
}

interface Body {
  type: string
  timestamp: string
  data: { id?: string; type?: string; occurredAt?: string; endpointId?: string }
}

/** The delivery bodies the doc shows: its JSON blocks with a `type` and `data` (the endpoint sample has none). */
function docBodies(): { text: string; body: Body }[] {
  return blocks(DOC, 'json')
    .map((text) => ({ text: text.trim(), body: parse(text) as Body }))
    .filter(({ body }) => typeof body.type === 'string' && typeof body.data === 'object')
}

/** Resolves once something listens on 127.0.0.1:`port` (no request sent: the receiver prints every request). */
async function listening(port: number): Promise<void> {
  for (;;) {
    const connected = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.destroy()
        resolve(true)
      })
      socket.once('error', () => resolve(false))
    })
    if (connected) return
    await sleep(50)
  }
}

test("docs/webhooks.md: the local quick start answers as the doc says, and each payload it shows has the fields of a real delivery, in the order sent", { skip: hasCurl ? false : 'curl is not installed', timeout: 180_000 }, async (t) => {
  const quickStart = section('Local quick start')
  const [serveBlock, receiverBlock, commandsBlock] = blocks(quickStart, 'sh') as [string, string, string]
  const [printedBlock] = blocks(quickStart, 'text') as [string]
  assert.ok(serveBlock !== undefined && receiverBlock !== undefined && commandsBlock !== undefined && printedBlock !== undefined, 'the quick start lost a block')

  // The settings, as the doc gives them to npm start (which runs serve --demo).
  const settings = /^((?:[A-Z_]+=\S+ )+)npm start\n$/.exec(serveBlock)?.[1]
  assert.ok(settings !== undefined, `not a line of settings before npm start: ${serveBlock}`)
  const env = Object.fromEntries(settings.trim().split(' ').map((pair) => pair.split('=') as [string, string]))
  assert.deepEqual(Object.keys(env), ['WEBHOOK_ALLOW_PRIVATE_NETWORKS', 'WEBHOOK_RETRY_SCHEDULE'])

  const dir = mkdtempSync(join(tmpdir(), 'petstore-webhooks-doc-'))
  const database = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }
  const demo = await startDemo({ ...database, ...env }, dir)
  const port = await freePort()
  const receiver = spawn('bash', ['-c', receiverBlock.trim().replace(".listen(3000, '127.0.0.1')", `.listen(${port}, '127.0.0.1')`)], { stdio: ['ignore', 'pipe', 'pipe'] })
  let printed = ''
  receiver.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()))
  receiver.stderr.on('data', (chunk: Buffer) => (printed += chunk.toString()))
  t.after(async () => {
    receiver.kill('SIGTERM')
    await demo.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  const lines = (): string[] => printed.split('\n').filter((line) => line !== '')
  /** Waits for the receiver to have printed `count` lines (each delivery is one), bounded by the test's timeout. */
  const printedLines = async (count: number): Promise<string[]> => {
    while (lines().length < count) await sleep(50)
    return lines()
  }
  await listening(port)

  // The CLI and curl lines, run as one script; each `# ` line is a line its commands print on stdout.
  const origin = new URL(demo.url).origin
  const script = commandsBlock
    .replaceAll('npx petstore-orders', `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)}`)
    .replaceAll('http://127.0.0.1:3000', `http://127.0.0.1:${port}`)
    .replaceAll('http://127.0.0.1:8080', origin)
  const run = spawnSync('bash', ['-ec', script], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, KEY: demo.key, ...database },
    encoding: 'utf8',
    timeout: 60_000,
  })
  assert.equal(run.status, 0, run.stderr)
  const expected = commandsBlock.split('\n').filter((line) => line.startsWith('# ')).map((line) => line.slice(2))
  const answered = run.stdout.trimEnd().split('\n')
  assert.equal(answered.length, expected.length, run.stdout)
  expected.forEach((line, i) => assert.match(answered[i]!, pattern(line), `line ${i + 1} of what the commands printed`))
  assert.match(run.stderr, /^created webhook endpoint 1 for /m, 'the id the ping uses is the one created')

  // What the receiver printed: the ping, then the order's event.
  const shown = printedBlock.trimEnd().split('\n')
  const received = await printedLines(shown.length)
  assert.equal(received.length, shown.length, printed)
  shown.forEach((line, i) => assert.match(received[i]!, pattern(line), `line ${i + 1} the receiver printed`))
  assert.match(received[0]!, /^ping_[0-9a-f]{24} /)

  // Then one change of each type, with the fields the doc's samples have (a ship date, a reason).
  const write = async (path: string, body?: object, method = 'POST'): Promise<string> => {
    const response = await fetch(`${origin}/v2/store/orders${path}`, {
      method,
      headers: { ...bearer(demo.key), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await response.text()
    assert.ok(response.ok, `${path}: ${response.status} ${text}`)
    return text
  }
  const idOf = (text: string): string => /^\{"id":(\d+),/.exec(text)?.[1] ?? assert.fail(text)
  const shipDate = '2026-12-01T10:00:00Z'
  const placed = idOf(await write('', { petId: 198772, quantity: 7, shipDate }))
  await write(`/${placed}`, { quantity: 8 }, 'PATCH') // order.updated, with its previous quantity
  await write(`/${placed}/ship`)
  await write(`/${placed}/complete`)
  const other = idOf(await write('', { petId: 4, quantity: 1, shipDate }))
  await write(`/${other}/cancel`, { reason: 'customer_request' })
  const all = await printedLines(shown.length + 6)

  const sent = new Map<string, { id: string; text: string }>() // the last body of each type, as the receiver got it
  for (const line of all) {
    const [id, text] = [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)]
    sent.set((parse(text) as Body).type, { id, text })
  }
  assert.deepEqual([...sent.keys()].sort(), [...ORDER_EVENT_TYPES, 'webhook.ping'].sort())

  const samples = docBodies()
  for (const type of [...ORDER_EVENT_TYPES, 'webhook.ping']) {
    assert.ok(samples.some(({ body }) => body.type === type), `docs/webhooks.md shows no ${type} payload`)
  }
  for (const { text, body } of samples) {
    const real = sent.get(body.type)
    assert.ok(real !== undefined, `the doc shows a payload of type ${body.type}, which the service does not send`)
    assert.deepEqual(shape(parse(text)), shape(parse(real.text)), `the ${body.type} sample:\n${text}\nagainst what was sent:\n${real.text}`)
    assert.doesNotMatch(text, /\s/, 'one line, no spaces, as sent')
    if (body.type !== 'webhook.ping') {
      // The event's own fields agree, as in every body sent.
      assert.deepEqual([body.data.type, body.data.occurredAt], [body.type, body.timestamp], text)
    }
  }

  // "A delivery": its body is the shipped sample's shape, and its signature is the endpoint sample's secret's.
  const http = blocks(section('A delivery'), 'http')[0]!
  const [head, deliveryText] = http.trim().split('\n\n') as [string, string]
  assert.deepEqual(shape(parse(deliveryText)), shape(parse(sent.get('order.shipped')!.text)))
  const header = (name: string): string => new RegExp(`^${name}: (.*)$`, 'm').exec(head)?.[1] ?? assert.fail(`no ${name} in the sample delivery`)
  const secret = /"secret":"(whsec_[^"]+)"/.exec(section('Endpoints'))?.[1] ?? assert.fail('no secret in the endpoint sample')
  assert.equal(header('webhook-id'), (parse(deliveryText) as Body).data.id)
  assert.equal(new Webhook(secret).sign(header('webhook-id'), new Date(Number(header('webhook-timestamp')) * 1000), deliveryText), header('webhook-signature'))
})
