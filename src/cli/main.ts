/** The entry point of `petstore-orders` (bin/petstore-orders.js imports this). */
import { runCli } from './run.js'

// A closed pipe (`petstore-orders keys list | head -1`) ends the output, not the program with a trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw error
})

process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env })
