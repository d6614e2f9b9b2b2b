import { fileURLToPath } from 'node:url'
import { join } from 'node:path'

/** The repository's root (this file is bench/lib/paths.ts, run by tsx from the sources). */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Where bench/tsconfig.build.json compiles src/ and bench/ (gitignored, as all of .bench/). */
export const BUILD_DIR = join(ROOT, '.bench', 'build')
/** Scratch files of a run (response bodies for the raw servers); gitignored. */
export const WORK_DIR = join(ROOT, '.bench', 'work')
