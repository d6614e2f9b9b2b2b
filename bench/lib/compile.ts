import { spawnSync } from 'node:child_process'
import { cpSync } from 'node:fs'
import { join } from 'node:path'
import { buildDirOf, ROOT } from './paths.js'

/**
 * src/ and bench/ to JavaScript in .bench/build, for the child processes (bench/tsconfig.build.json),
 * with the files the server reads beside its code where they are from dist/: src/http/assets (found
 * as ../../../src/… from the compiled routes) and package.json (two folders up from the compiled
 * tracing SDK, for service.version; also the build's "type": "module").
 */
export function compileBench(root = ROOT): void {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'bench', 'tsconfig.build.json')], { stdio: 'inherit' })
  if (result.status !== 0) throw new Error(`compiling src/ and bench/ of ${root} for the bench failed`)
  const build = buildDirOf(root)
  cpSync(join(root, 'src', 'http', 'assets'), join(build, 'src', 'http', 'assets'), { recursive: true })
  cpSync(join(root, 'package.json'), join(build, 'package.json'))
}
