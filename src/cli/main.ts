/** The entry point of `petstore-orders` (bin/petstore-orders.js imports this). */
import { fileProblem } from '../file-problem.js'
import { PROGRAM } from './command.js'
import { runCli } from './run.js'

// A closed pipe (`petstore-orders keys list | head -1`) ends the output, not the program with a trace.
// Any other failure to write it (a full disk, /dev/full) is one line and exit 1, as every error is.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  process.stderr.write(`${PROGRAM}: cannot write to standard output: ${fileProblem(error)}\n`)
  process.exit(1)
})

process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env })
