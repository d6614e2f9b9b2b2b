import { spawnSync, type SpawnSyncOptions } from 'node:child_process'
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { compileBench } from './compile.js'
import { buildDirOf, ROOT } from './paths.js'

/**
 * The project as it stood at an earlier commit, for a comparison whose target is "no worse than
 * then": measured in the same run as this tree, on the same host, rather than against a figure
 * taken on another day. The commit's files (`git archive`, so nothing of this tree's work leaks in)
 * go to .bench/reference/<commit>, with its own locked dependencies (`npm ci`), compiled as this
 * tree's bench compiles itself. Made once and reused; returns its build folder, for Child's `build`.
 */
export function referenceBuild(commit: string): string {
  const sha = run('git', ['rev-parse', '--verify', `${commit}^{commit}`], { cwd: ROOT }).trim()
  const root = join(ROOT, '.bench', 'reference', sha)
  const build = buildDirOf(root)
  if (existsSync(join(build, 'bench', 'lib', 'project-server.js'))) return build
  console.log(`  building the reference ${sha.slice(0, 12)} in ${root} (once) …`)
  const partial = `${root}.partial`
  rmSync(partial, { recursive: true, force: true })
  mkdirSync(partial, { recursive: true })
  run('sh', ['-c', `git archive ${sha} | tar -x -C '${partial}'`], { cwd: ROOT })
  run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: partial, stdio: ['ignore', 'ignore', 'inherit'] })
  // Compiled where it will stay: the build is found by paths relative to its tree.
  rmSync(root, { recursive: true, force: true })
  renameSync(partial, root)
  compileBench(root)
  return build
}

function run(command: string, args: string[], options: SpawnSyncOptions): string {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options })
  if (result.status !== 0) {
    const why = result.error?.message ?? String(result.stderr ?? '').trim()
    throw new Error(`building the reference: ${command} ${args.join(' ')} failed${why === '' ? '' : `: ${why}`}`)
  }
  return String(result.stdout ?? '')
}
