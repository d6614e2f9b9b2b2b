import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { isBuiltin } from 'node:module'
import { join, relative } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

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

// A package's API is what its package.json `exports` lists; without an exports map, its bare name
// (its main entry) alone. Any other path into a package is one of its internal files, free to move
// or change in a patch release: src/ imports none.
describe("src/ uses packages only through their entry points", () => {
  it('finds every way a module names another: imports, re-exports, import types, import(), require and createRequire', () => {
    const source = `
      import a from 'a'
      import type { B } from '@scope/b/deep.js'
      export * from 'c/c.js'
      export { d } from './d.js'
      type E = import('e/types').E
      declare module 'f' {}
      await import('g')
      const require = createRequire(import.meta.url)
      require('h/lib/h.js')
      require.resolve('i/package.json')
      createRequire(import.meta.url)('j')
      createRequire(import.meta.url).resolve('k/dist/k.js')
      import.meta.resolve('l')
      path.resolve('not-a-module')
      String('nor-this')`
    assert.deepEqual(moduleSpecifiers('fixture.ts', source), ['a', '@scope/b/deep.js', 'c/c.js', './d.js', 'e/types', 'f', 'g', 'h/lib/h.js', 'i/package.json', 'j', 'k/dist/k.js', 'l'])
  })

  it("tells an internal path from an entry point by the package's exports map", () => {
    const exportsOf = (name: string): PackageExports =>
      ({ plain: undefined, mapped: { '.': './index.js', './client': './client.js', './src/*': './src/*', './hidden/*': null } })[name]
    for (const allowed of ['node:fs', 'fs', './local.js', '../up.js', '#own', 'plain', 'mapped', 'mapped/client', 'mapped/src/a/b.js', '@scope/plain']) {
      assert.equal(internalPath(allowed, exportsOf), undefined, allowed)
    }
    for (const internal of ['plain/lib/x.js', 'plain/package.json', '@scope/plain/store/x.js', 'mapped/index.js', 'mapped/hidden/x', 'mapped/client/x.js']) {
      assert.notEqual(internalPath(internal, exportsOf), undefined, internal)
    }
  })

  it('holds for every file under src/', () => {
    const exportsOf = (name: string): PackageExports => {
      const manifest = JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, root), 'utf8')) as { exports?: PackageExports }
      return manifest.exports
    }
    const found: string[] = []
    for (const file of filesUnder(new URL('src/', root))) {
      for (const specifier of moduleSpecifiers(file, readFileSync(file, 'utf8'))) {
        const reason = internalPath(specifier, exportsOf)
        if (reason !== undefined) found.push(`${relative(fileURLToPath(root), file)}: '${specifier}' ${reason}`)
      }
    }
    assert.deepEqual(found, [])
  })
})

type PackageExports = string | null | { [key: string]: PackageExports } | undefined

/** The module specifiers `text` names, in order. */
function moduleSpecifiers(fileName: string, text: string): string[] {
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    let named: ts.Node | undefined
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) named = node.moduleSpecifier
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) named = node.argument.literal
    else if (ts.isModuleDeclaration(node)) named = node.name // `declare module 'x'` augments x's own types
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) named = node.moduleReference.expression
    else if (ts.isCallExpression(node) && loadsModule(node.expression)) named = node.arguments[0]
    if (named !== undefined && ts.isStringLiteralLike(named)) found.push(named.text)
    ts.forEachChild(node, visit)
  }
  visit(ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true))
  return found
}

/** import(x), require(x), require.resolve(x), createRequire(…)(x), createRequire(…).resolve(x), import.meta.resolve(x). */
function loadsModule(callee: ts.Expression): boolean {
  if (callee.kind === ts.SyntaxKind.ImportKeyword) return true
  const target = ts.isPropertyAccessExpression(callee) && callee.name.text === 'resolve' ? callee.expression : callee
  if (ts.isMetaProperty(target)) return target !== callee
  if (ts.isIdentifier(target)) return target.text === 'require'
  return ts.isCallExpression(target) && ts.isIdentifier(target.expression) && target.expression.text === 'createRequire'
}

/** Why `specifier` reaches into another package's internal files, or undefined if it does not. */
function internalPath(specifier: string, exportsOf: (name: string) => PackageExports): string | undefined {
  if (/^[./#]/.test(specifier) || isBuiltin(specifier)) return undefined // this package's own, or Node's
  const parts = specifier.split('/')
  const name = parts.splice(0, specifier.startsWith('@') ? 2 : 1).join('/')
  if (parts.length === 0) return undefined
  const subpath = `./${parts.join('/')}`
  const exports = exportsOf(name)
  if (exports === undefined || exports === null) return `is inside ${name}, which has no exports map: only '${name}' is its API`
  const map = typeof exports === 'string' || Object.keys(exports).every((key) => !key.startsWith('.')) ? { '.': exports } : exports
  const listed = Object.entries(map).some(([key, target]) => {
    if (target === null) return false
    const star = key.indexOf('*')
    return star === -1 ? key === subpath : subpath.startsWith(key.slice(0, star)) && subpath.endsWith(key.slice(star + 1))
  })
  return listed ? undefined : `is not in ${name}'s exports map`
}

function filesUnder(dir: URL): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.[cm]?[jt]s$/.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name))
}
