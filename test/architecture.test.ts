import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { it } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

// The layers a reader takes for the architecture (LAYERS, from the ground up): each module of src/
// imports only from its own layer and the layers below it, type-only imports too. So the rules
// (domain/) import nothing else of src/ but the small helpers beside them, the API's shapes
// (schemas/) no storage, and the store no transport, tracing or background machinery built on it.
// And no module of src/ reaches itself again through its imports, type-only ones included (a
// type-only circle is no fault at run time, but it still ties the modules into one that must be
// read whole).

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const src = join(root, 'src')

/** Each folder or file at the top of src/ in one layer, from the ground up. */
const LAYERS: readonly { name: string; members: readonly string[] }[] = [
  {
    name: 'the rules, and helpers every layer may use',
    members: ['domain', 'errors.ts', 'trace-context.ts', 'file-problem.ts', 'log-redaction.ts', 'maybe-async.ts', 'once-per-turn.ts', 'outage-log.ts', 'redact-url.ts'],
  },
  { name: "the API's shapes and the configuration", members: ['schemas', 'config.ts', 'listen-address.ts', 'unknown-variables.ts'] },
  { name: 'the store', members: ['store'] },
  { name: 'what works on the store', members: ['events', 'keys', 'pruning', 'tracing', 'webhooks'] },
  { name: 'the HTTP API, and the demo', members: ['http', 'demo'] },
  { name: 'the service', members: ['app.ts', 'server.ts'] },
  { name: 'the command line', members: ['cli'] },
]

interface Edge {
  from: string
  to: string
  /** The module specifier as written, for the message. */
  specifier: string
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : []
  })
}

/** Every relative import of src/ (static, type-only, re-exports and `import()`), resolved to its file. */
function importEdges(): Edge[] {
  const edges: Edge[] = []
  for (const file of sourceFiles(src)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true)
    for (const { fileName: specifier } of importedFiles) {
      if (!specifier.startsWith('.')) continue
      const target = resolve(dirname(file), specifier)
      const candidates = [target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts')]
      const to = candidates.find((candidate) => existsSync(candidate))
      if (to !== undefined) edges.push({ from: file, to, specifier }) // an unresolved one is the type checker's to report
    }
  }
  return edges
}

const name = (file: string): string => relative(root, file)

/** The index in LAYERS of the top-level folder or file of src/ that holds `file`; -1 when none does. */
const layerOf = (file: string): number => {
  const top = relative(src, file).split('/')[0]!
  return LAYERS.findIndex((layer) => layer.members.includes(top))
}

it('places every folder and file at the top of src/ in one layer', () => {
  const placed = LAYERS.flatMap((layer) => layer.members)
  assert.deepEqual(placed.filter((member, i) => placed.indexOf(member) !== i), [], 'in more than one layer')
  const tops = readdirSync(src, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() || (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')))
    .map((entry) => entry.name)
  assert.deepEqual(tops.filter((top) => !placed.includes(top)), [], 'in no layer of LAYERS')
  assert.deepEqual(placed.filter((member) => !tops.includes(member)), [], 'in LAYERS, but not in src/')
})

it('no module of src/ imports from a layer above its own', () => {
  const offences = importEdges()
    .filter((edge) => layerOf(edge.to) > layerOf(edge.from))
    .map((edge) => `${name(edge.from)} (${LAYERS[layerOf(edge.from)]?.name}) imports ${name(edge.to)} (${LAYERS[layerOf(edge.to)]?.name}) ('${edge.specifier}')`)
  if (offences.length > 0) assert.fail(`imports that run up the layers:\n  ${offences.join('\n  ')}`)
})

it('no module of src/ imports itself again through other modules', () => {
  const edges = importEdges()
  const next = new Map<string, Edge[]>()
  for (const edge of edges) next.set(edge.from, [...(next.get(edge.from) ?? []), edge])

  // Tarjan's strongly connected components: each component of more than one module (or a module
  // importing itself) holds at least one circle.
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const components: string[][] = []
  const visit = (file: string): void => {
    index.set(file, index.size)
    low.set(file, index.get(file)!)
    stack.push(file)
    onStack.add(file)
    for (const { to } of next.get(file) ?? []) {
      if (!index.has(to)) {
        visit(to)
        low.set(file, Math.min(low.get(file)!, low.get(to)!))
      } else if (onStack.has(to)) {
        low.set(file, Math.min(low.get(file)!, index.get(to)!))
      }
    }
    if (low.get(file) !== index.get(file)) return
    const component: string[] = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== file)
    if (component.length > 1 || (next.get(file) ?? []).some((edge) => edge.to === file)) components.push(component)
  }
  for (const file of sourceFiles(src)) if (!index.has(file)) visit(file)

  const circles = components.map((component) => describeCircle(component, next))
  if (circles.length > 0) assert.fail(`import circles (each import named as written):\n  ${circles.join('\n  ')}`)
})

/** One circle through a component, shortest from its first module in sorted order, with each import as written. */
function describeCircle(component: string[], next: Map<string, Edge[]>): string {
  const members = new Set(component)
  const start = [...component].sort()[0]!
  // Breadth-first inside the component, back to `start`.
  const cameBy = new Map<string, Edge>()
  const queue = [start]
  let last: Edge | undefined
  while (queue.length > 0 && last === undefined) {
    const file = queue.shift()!
    for (const edge of next.get(file) ?? []) {
      if (!members.has(edge.to)) continue
      if (edge.to === start) {
        last = edge
        break
      }
      if (!cameBy.has(edge.to)) {
        cameBy.set(edge.to, edge)
        queue.push(edge.to)
      }
    }
  }
  const path: Edge[] = [last!]
  while (path[0]!.from !== start) path.unshift(cameBy.get(path[0]!.from)!)
  const steps = path.map((edge) => `${name(edge.from)} imports '${edge.specifier}'`)
  const others = component.length > path.length ? ` (its tangle also holds ${component.length - path.length} other module(s))` : ''
  return `${steps.join(' → ')} → back to ${name(start)}${others}`
}
