/**
 * Every file a comment or a document names exists: the comments of src/, bench/, test/ and
 * packages/client/src, and the Markdown documents. A file moved or removed leaves no comment
 * pointing at it. A name is looked for beside the file citing it, from the repository's root, from
 * src/, then as the end of the path of any file of the repository (a bare name: any file so named).
 * A `.js` name may be the `.ts` file it is compiled from (as imports name them), and dist/ is src/.
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { it } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const SKIPPED_FOLDERS = new Set(['node_modules', 'dist', '.git', 'data', 'coverage', '.bench'])
const COMMENTED = ['src', 'bench', 'test', 'packages/client/src']

/** Every file of the working tree, as paths from the root with `/`. */
function repositoryFiles(folder = ''): string[] {
  const files: string[] = []
  for (const entry of readdirSync(join(ROOT, folder), { withFileTypes: true })) {
    const path = folder === '' ? entry.name : `${folder}/${entry.name}`
    if (entry.isDirectory()) {
      if (!SKIPPED_FOLDERS.has(entry.name)) files.push(...repositoryFiles(path))
    } else files.push(path)
  }
  return files
}

/** The text of every comment of a TypeScript source, found through its tokens (strings and templates are not comments). */
function commentsOf(path: string, text: string): { text: string; line: number }[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true)
  const seen = new Set<number>()
  const comments: { text: string; line: number }[] = []
  const collect = (ranges: ts.CommentRange[] | undefined): void => {
    for (const range of ranges ?? []) {
      if (seen.has(range.pos)) continue
      seen.add(range.pos)
      comments.push({ text: text.slice(range.pos, range.end), line: source.getLineAndCharacterOfPosition(range.pos).line + 1 })
    }
  }
  const visit = (node: ts.Node): void => {
    collect(ts.getLeadingCommentRanges(text, node.pos))
    collect(ts.getTrailingCommentRanges(text, node.end))
    for (const child of node.getChildren(source)) visit(child)
  }
  visit(source)
  return comments
}

/**
 * The file names in `text`: a name with an extension of source or documentation (`.ts`, `.md`), or
 * a path with `/` to a `.js` or `.json` file (a bare `.js` is more often a package, as ipaddr.js,
 * than a file). URLs, paths of a URL (`/v1/openapi.json`) and Node's own files are not the repository's.
 */
function citedIn(text: string): string[] {
  const withoutUrls = text.replace(/\b[a-z][\w+.-]*:\/\/\S+/g, ' ')
  const cited: string[] = []
  for (const match of withoutUrls.matchAll(/(?<![\w./*}$@:-])((?:\.\.?\/)*(?:[\w-][\w.-]*\/)*[\w-][\w.-]*\.(ts|md|js|json))(?![\w/-])/g)) {
    const [, name, extension] = match as unknown as [string, string, string]
    if ((extension === 'js' || extension === 'json') && !name.includes('/')) continue
    // Node's own sources (`Node's lib/_http_server.js`) are not this repository's.
    if (/Node's[\s*]*$/.test(withoutUrls.slice(0, match.index))) continue
    cited.push(name)
  }
  return cited
}

function resolves(name: string, citedFrom: string, files: Set<string>, byEnd: (suffix: string) => boolean): boolean {
  const candidates = [name]
  if (name.endsWith('.js')) candidates.push(name.replace(/\.js$/, '.ts'))
  for (const candidate of [...candidates]) if (candidate.startsWith('dist/')) candidates.push(`src/${candidate.slice(5)}`)
  const exists = (path: string): boolean => files.has(path) || (existsSync(join(ROOT, path)) && statSync(join(ROOT, path)).isFile())
  for (const candidate of candidates) {
    for (const base of [dirname(citedFrom), '.', 'src']) {
      const path = normalize(join(base, candidate)).split('\\').join('/')
      if (!path.startsWith('..') && exists(path)) return true
    }
    if (!candidate.startsWith('.') && byEnd(candidate)) return true
  }
  return false
}

/** Each cited name that no file answers, as `file:line: name`. */
function unresolved(): string[] {
  const all = repositoryFiles()
  const files = new Set(all)
  const byEnd = (suffix: string): boolean => all.some((path) => path === suffix || path.endsWith(`/${suffix}`))
  const missing: string[] = []
  for (const path of all) {
    const isSource = COMMENTED.some((folder) => path.startsWith(`${folder}/`)) && path.endsWith('.ts')
    if (!isSource && !path.endsWith('.md')) continue
    const text = readFileSync(join(ROOT, path), 'utf8')
    const passages = isSource ? commentsOf(path, text) : text.split('\n').map((line, i) => ({ text: line, line: i + 1 }))
    for (const passage of passages) {
      for (const name of citedIn(passage.text)) {
        if (!resolves(name, path, files, byEnd)) missing.push(`${path}:${passage.line}: ${name}`)
      }
    }
  }
  return missing
}

it('finds names in comments, not in strings, and tells a missing file from an existing one', () => {
  const text = [
    '// See ../store/group-commit.ts and store-writes.test.ts, and Node\'s lib/_http_server.js.',
    "const a = 'inside-a-string.ts' // trailing: dist/cli/main.js",
    'const b = `template ${a} with // no-comment.ts`',
    '/** Block: docs/production.md, ipaddr.js, https://example.com/x.md, GET /v1/openapi.json, test/*.test.ts. */',
    'function f(): void {',
    '  // gone-file.ts, inside an empty body',
    '}',
  ].join('\n')
  const names = commentsOf('src/http/example.ts', text).flatMap((comment) => citedIn(comment.text))
  assert.deepEqual(names, ['../store/group-commit.ts', 'store-writes.test.ts', 'dist/cli/main.js', 'docs/production.md', 'gone-file.ts'])
  const files = new Set(repositoryFiles())
  const byEnd = (suffix: string): boolean => [...files].some((path) => path === suffix || path.endsWith(`/${suffix}`))
  assert.deepEqual(
    names.filter((name) => !resolves(name, 'src/http/example.ts', files, byEnd)),
    ['gone-file.ts'],
  )
})

it('every file a comment in src/, bench/, test/ or packages/client/src, or a Markdown document, names exists', () => {
  const missing = unresolved()
  assert.deepEqual(missing, [], "names of files that do not exist: fix the comment, or the path")
})
