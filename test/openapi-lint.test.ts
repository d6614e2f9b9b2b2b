import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { after, before, describe, it } from 'node:test'
import { ERRORS, V1_ERROR_CODES } from '../src/errors.js'
import { startTestServer } from './support/harness.js'

const REDOCLY_CLI = join(dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')), 'bin', 'cli.js')
const REDOCLY_CONFIG = fileURLToPath(new URL('../redocly.yaml', import.meta.url))

interface Media {
  schema?: { $ref?: string }
  examples?: Record<string, { value: { code: string; message: string; status: number } }>
}
interface Operation {
  operationId: string
  summary?: string
  description?: string
  responses: Record<string, { description: string; content?: Record<string, Media> }>
}
interface Document {
  info: { description: string }
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, { example?: unknown }> }
}

// The document does not depend on the store, so one store is enough.
describe('OpenAPI document: redocly lint and what a reader needs', () => {
  let dir: string
  let file: string
  let document: Document

  before(async () => {
    const server = await startTestServer('sqlite')
    const response = await fetch(`${server.origin}/v1/openapi.json`)
    assert.equal(response.status, 200)
    const text = await response.text()
    document = JSON.parse(text) as Document
    dir = mkdtempSync(join(tmpdir(), 'petstore-openapi-lint-'))
    file = join(dir, 'openapi.json')
    writeFileSync(file, text)
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('passes `redocly lint` (recommended rules and redocly.yaml) with no error and no warning', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [REDOCLY_CLI, 'lint', file, '--config', REDOCLY_CONFIG, '--format=json'], {
      // Offline and quiet: no usage telemetry, no update check.
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      timeout: 120_000,
    }).catch((error: { stdout?: string; stderr?: string }) => {
      assert.fail(`redocly lint failed:\n${error.stdout ?? ''}\n${error.stderr ?? ''}`)
    })
    const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: unknown[] }
    assert.deepEqual(report.totals, { ...report.totals, errors: 0, warnings: 0 }, JSON.stringify(report.problems, null, 2))
  })

  it('gives every operation a summary and a description', () => {
    const operations = Object.values(document.paths).flatMap((item) => Object.values(item))
    assert.deepEqual(operations.map((op) => op.operationId).sort(), ['cancelOrder', 'listOrders', 'showPetById'])
    for (const op of operations) {
      assert.ok((op.summary ?? '').length > 0, `${op.operationId}: summary`)
      assert.ok((op.description ?? '').length > (op.summary ?? '').length, `${op.operationId}: description`)
    }
  })

  it('has examples for Order, Pet and Error', () => {
    const { Order, Pet, Error: ErrorSchema } = document.components.schemas
    assert.deepEqual(Object.keys(Order!.example as object), ['id', 'petId', 'quantity', 'shipDate', 'complete'])
    assert.deepEqual(Object.keys(Pet!.example as object), ['id', 'name', 'tag'])
    assert.deepEqual(Object.keys(ErrorSchema!.example as object), ['code', 'message', 'status'])
  })

  it('lists every error code in the description, and shows each error response with an example of each of its codes', () => {
    for (const code of V1_ERROR_CODES) {
      assert.ok(document.info.description.includes(`| \`${code}\` | ${ERRORS[code].status} |`), `${code} in info.description`)
    }
    const seen = new Set<string>()
    for (const item of Object.values(document.paths)) {
      for (const op of Object.values(item)) {
        for (const [status, response] of Object.entries(op.responses)) {
          if (Number(status) < 400) continue
          const media = response.content?.['application/json']
          assert.equal(media?.schema?.$ref, '#/components/schemas/Error', `${op.operationId} ${status}`)
          const examples = Object.entries(media?.examples ?? {})
          assert.ok(examples.length > 0, `${op.operationId} ${status}: no example`)
          for (const [name, { value }] of examples) {
            assert.equal(value.status, Number(status), `${op.operationId} ${status} ${name}`)
            assert.equal(value.code, name)
            assert.equal(value.message, ERRORS[name as keyof typeof ERRORS].message)
            assert.ok(response.description.includes(`\`${name}\``), `${op.operationId} ${status}: the description names ${name}`)
            seen.add(`${op.operationId} ${status} ${name}`)
          }
        }
      }
    }
    for (const expected of [
      'listOrders 401 unauthorized',
      'listOrders 403 insufficient_scope',
      'cancelOrder 400 invalid_order_id',
      'cancelOrder 404 order_not_found',
      'cancelOrder 409 order_already_shipped',
      'showPetById 410 gone',
    ]) {
      assert.ok(seen.has(expected), expected)
    }
  })
})
