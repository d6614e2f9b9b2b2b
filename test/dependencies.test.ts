import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { it } from 'node:test'

// The dependency tree is the lock file's, exactly. The advisory audit (`npm audit`) needs the
// registry, so it is a step of CI (.ci/run), not a test.
const root = new URL('../', import.meta.url)
const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as Record<string, Record<string, string> | undefined>
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, { version?: string; dependencies?: Record<string, string>; devDependencies?: Record<string, string> }>
}
const kinds = ['dependencies', 'devDependencies'] as const

it('pins every direct dependency to an exact version', () => {
  for (const kind of kinds) {
    for (const [name, range] of Object.entries(manifest[kind] ?? {})) {
      assert.match(range, /^\d+\.\d+\.\d+$/, `${kind}.${name} is "${range}", not an exact version`)
    }
  }
})

it('has a lock file that matches package.json', () => {
  for (const kind of kinds) {
    assert.deepEqual(lock.packages['']![kind] ?? {}, manifest[kind] ?? {}, `package-lock.json's ${kind} differ from package.json's: run npm install`)
    for (const [name, version] of Object.entries(manifest[kind] ?? {})) {
      assert.equal(lock.packages[`node_modules/${name}`]?.version, version, `package-lock.json locks ${name} at another version than ${version}`)
    }
  }
})
