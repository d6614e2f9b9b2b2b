import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { BIN, freePort } from './server-process.js'

/** `serve --demo` on a free port; resolves with the key and URL of its curl line once it is printed. */
export async function startDemo(env: Record<string, string>, cwd: string): Promise<{ key: string; url: string; output: string; stop(): Promise<number | null> }> {
  const port = await freePort()
  const child = spawn(process.execPath, [BIN, 'serve', '--demo'], {
    cwd,
    env: { ...process.env, ...env, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const curl = await new Promise<RegExpExecArray>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`no curl line in 20 s; stdout: ${stdout}; stderr: ${stderr}`))
    }, 20_000)
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const match = /curl -H "Authorization: Bearer (pso_[0-9A-Za-z]+)" (http:\/\/\S+\/v1\/store\/orders)\n/.exec(stdout)
      if (match !== null) {
        clearTimeout(timer)
        resolve(match)
      }
    })
    void exited.then((code) => reject(new Error(`serve --demo exited with ${code}: ${stdout} ${stderr}`)))
  })
  assert.equal(curl[2], `http://127.0.0.1:${port}/v1/store/orders`)
  assert.match(stdout, new RegExp(`listening on http://127\\.0\\.0\\.1:${port}/v1\\n`))
  assert.match(stdout, new RegExp(`demo API key: ${curl[1]}\\n`))
  return {
    key: curl[1]!,
    url: curl[2]!,
    output: stdout,
    async stop() {
      child.kill('SIGTERM')
      return exited
    },
  }
}
