import { fileURLToPath } from 'node:url'
import { join } from 'node:path'

/** The repository's root (this file is bench/lib/paths.ts, run by tsx from the sources). */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Where a tree's bench/tsconfig.build.json compiles its src/ and bench/ (gitignored, as all of .bench/). */
export function buildDirOf(root: string): string {
  return join(root, '.bench', 'build')
}
/** This tree's build. */
export const BUILD_DIR = buildDirOf(ROOT)
/** Scratch files of a run (response bodies for the raw servers); gitignored. */
export const WORK_DIR = join(ROOT, '.bench', 'work')
