/**
 * The README's Configuration table and the variables the configuration reads are one list: a
 * setting added on one side only fails here. What is read is found by reading: the configuration
 * is loaded from an environment that records every name it is asked for.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { debugging, KNOWN_VARIABLES, loadConfig, RETIRED_SETTINGS } from '../src/config.js'

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8')

/** The variables named in the first column of the Configuration table. */
function documented(): string[] {
  const section = /\n## Configuration\n([\s\S]*?)\n## /.exec(README)?.[1]
  assert.ok(section !== undefined, 'no Configuration section in README.md')
  const names: string[] = []
  for (const row of section.split('\n').filter((line) => line.startsWith('| `'))) {
    for (const [, name] of row.split('|')[1]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)) names.push(name!)
  }
  return names
}

/** Every name asked of the environment while loading the configuration from `env`. */
function namesRead(env: Record<string, string>): string[] {
  const read = new Set<string>()
  const recording = new Proxy(env, {
    get(target, name) {
      if (typeof name === 'string') read.add(name)
      return Reflect.get(target, name) as unknown
    },
  })
  loadConfig(recording)
  debugging(recording)
  return [...read]
}

test('every variable the configuration reads is in the README table, and every one there is read', () => {
  // Nothing set, then PostgreSQL (its pool size) and tracing on (its protocol): every reader runs.
  const read = new Set([...namesRead({}), ...namesRead({ DATABASE_URL: 'postgres://db.internal/petstore', OTEL_TRACES_EXPORTER: 'otlp' })])
  for (const retired of Object.keys(RETIRED_SETTINGS)) read.delete(retired) // read to be refused
  const known = [...KNOWN_VARIABLES].sort()
  assert.deepEqual([...read].sort(), known, 'the names config.ts reads are its list of settings')
  const inReadme = documented()
  assert.equal(new Set(inReadme).size, inReadme.length, 'a variable is in the README table twice')
  assert.deepEqual(
    known.filter((name) => !inReadme.includes(name)),
    [],
    'read by the service but missing from the README table',
  )
  assert.deepEqual(
    inReadme.filter((name) => !KNOWN_VARIABLES.has(name)),
    [],
    'in the README table but not read by the service',
  )
})
