/**
 * The README's table of metrics against a real server's scrape: every family /metrics declares
 * (`# TYPE`) is in the table with the same type and its labels named, and every family the table
 * names is declared, so the operator's list can neither miss a metric nor keep a removed one.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { it } from 'node:test'
import { createDatabase, forEachStore } from './support/harness.js'
import { spawnServer } from './support/server-process.js'

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8')

interface Row {
  type: string
  /** Every name in backquotes in the labels cell (label names and, after them, some values). */
  labels: Set<string>
}

/** The rows of the table whose header is `| metric | type | labels | … |`, by family name. */
function readmeMetrics(): Map<string, Row> {
  const table = /^\| metric \| type \| labels \|[^\n]*\n\|[-|]+\|\n((?:\|[^\n]*\n)+)/m.exec(README)?.[1]
  assert.ok(table !== undefined, 'README.md has no table headed | metric | type | labels |')
  const families = new Map<string, Row>()
  for (const line of table.trimEnd().split('\n')) {
    const [names, type, labels] = line.split('|').slice(1).map((cell) => cell.trim())
    const row = { type: type ?? '', labels: new Set(backquoted(labels ?? '')) }
    for (const name of backquoted(names ?? '')) {
      assert.ok(!families.has(name), `${name} is in the README's table twice`)
      families.set(name, row)
    }
  }
  return families
}

function backquoted(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!)
}

/** Each family `# TYPE` declares, with its type and the label names its samples carry (not `le`). */
function scraped(text: string): Map<string, Row> {
  const families = new Map<string, Row>()
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) families.set(name!, { type: type!, labels: new Set() })
  for (const [, sample, labels] of text.matchAll(/^([a-zA-Z_:][\w:]*)\{([^}]*)\}/gm)) {
    const family = [sample!, sample!.replace(/_(bucket|sum|count)$/, '')].map((name) => families.get(name)).find((found) => found !== undefined)
    assert.ok(family !== undefined, `a sample of no declared family: ${sample}`)
    for (const [, label] of labels!.matchAll(/([a-zA-Z_]\w*)="/g)) if (label !== 'le') family.labels.add(label!)
  }
  return families
}

forEachStore("the README's metrics table", (kind) => {
  it('lists every family /metrics exports, with its type and labels, and no other', async () => {
    const database = await createDatabase(kind)
    const server = await spawnServer(database.url)
    try {
      // A request of each kind first, so the labelled families have samples whose labels are checked.
      await (await fetch(`${server.origin}/healthz`)).arrayBuffer()
      await (await fetch(`${server.origin}/nope`)).arrayBuffer()
      const response = await fetch(`${server.origin}/metrics`)
      assert.equal(response.status, 200)
      const exported = scraped(await response.text())
      const documented = readmeMetrics()
      assert.ok(exported.size >= 10, `only ${exported.size} families scraped`)

      const missing = [...exported.keys()].filter((name) => !documented.has(name))
      assert.deepEqual(missing, [], 'families /metrics exports that the README does not list')
      const gone = [...documented.keys()].filter((name) => !exported.has(name))
      assert.deepEqual(gone, [], 'families the README lists that /metrics does not export')
      for (const [name, { type, labels }] of exported) {
        const row = documented.get(name)!
        assert.equal(row.type, type, `the README's type of ${name}`)
        for (const label of labels) assert.ok(row.labels.has(label), `the README does not name the label ${label} of ${name}`)
      }
    } finally {
      server.child.kill('SIGTERM')
      await server.exited
      await database.dispose()
    }
  })
})
