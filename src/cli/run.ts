import { readFileSync } from 'node:fs'
import { ConfigError, debugging } from '../config.js'
import { redactUrl } from '../redact-url.js'
import { unknownVariables, unknownVariableWarning } from '../unknown-variables.js'
import { CommandError, oneLine, parseCommandArgs, printable, PROGRAM, UsageError, type Command, type Io } from './command.js'
import { backup } from './commands/backup.js'
import { eventsTail } from './commands/events.js'
import { healthcheck } from './commands/healthcheck.js'
import { keysCreate, keysList, keysRevoke } from './commands/keys.js'
import { migrate } from './commands/migrate.js'
import { ordersComplete, ordersImport, ordersShip, ordersUpdate } from './commands/orders.js'
import { petsImport } from './commands/pets.js'
import { seed } from './commands/seed.js'
import { serve } from './commands/serve.js'
import {
  webhooksAdd,
  webhooksAttempts,
  webhooksDisable,
  webhooksEnable,
  webhooksList,
  webhooksPing,
  webhooksRemove,
  webhooksReplay,
  webhooksRotate,
} from './commands/webhooks.js'

const COMMANDS: Command[] = [serve, migrate, backup, healthcheck, keysCreate, keysList, keysRevoke, ordersImport, ordersShip, ordersComplete, ordersUpdate, petsImport, seed, eventsTail,
  webhooksAdd, webhooksList, webhooksRemove, webhooksReplay, webhooksPing, webhooksAttempts, webhooksRotate, webhooksEnable, webhooksDisable]

const GROUPS: Record<string, string> = {
  keys: 'API keys: create, list, revoke',
  orders: 'orders: import a file; ship, complete or update one',
  pets: 'pets: import a file',
  events: 'the order event feed: tail it',
  webhooks: 'webhook endpoints: add, list, remove, replay, ping, attempts, rotate, enable, disable',
}

const ENVIRONMENT = `Environment:
  DATABASE_URL   the database: postgres://… or postgresql://… for PostgreSQL, sqlite:PATH for
                 a SQLite file; unset: the SQLite file ./data/petstore.db. Every command
                 but healthcheck opens it, and all but healthcheck and backup migrate its
                 schema first. A SQLite file that does not exist is created by serve,
                 migrate, seed and the imports, and refused by the others.
  DATABASE_URL_FILE
                 instead of DATABASE_URL: a file holding its value (a Docker or Kubernetes
                 secret); whitespace at either end is left out. Never both.
  PETSTORE_DEBUG set to 1: an unexpected error also prints its stack trace.
  A variable that looks like a setting but is not one (DATABSE_URL, database_url) is named
  in a "${PROGRAM}: warning: …" line on stderr before the command starts (serve: in its log).`

const EXIT_STATUS = `Exit status: 0 done; 1 failed (nothing half-done is left behind); 2 the command line is wrong.
Errors are one line on stderr: "${PROGRAM}: <what is wrong>".`

function commandList(commands: Command[]): string {
  const width = Math.max(...commands.map((command) => command.synopsis.length))
  return commands.map((command) => `  ${command.synopsis.padEnd(width)}   ${command.summary}`).join('\n')
}

function topHelp(): string {
  return `Usage: ${PROGRAM} COMMAND [ARGUMENTS] [OPTIONS]

Operates the Petstore Orders service: runs the HTTP API, migrates its database, manages API keys,
imports orders and pets, seeds demo data, prints the order event feed, and manages webhook endpoints.

Commands:
${commandList(COMMANDS)}

Run '${PROGRAM} COMMAND --help' (or '${PROGRAM} help COMMAND') for the details and examples of a command.

Examples:
  ${PROGRAM} serve --demo
  ${PROGRAM} keys create --name billing-service
  DATABASE_URL=postgres://petstore@db.internal/petstore ${PROGRAM} orders import orders.ndjson
  ${PROGRAM} events tail --after 1234

Options:
  -h, --help     show this help
  --version      print the version

${ENVIRONMENT}

${EXIT_STATUS}`
}

function groupHelp(group: string): string {
  const commands = COMMANDS.filter((command) => command.name[0] === group)
  return `Usage: ${PROGRAM} ${group} SUBCOMMAND …

${GROUPS[group]!.replace(/^./, (c) => c.toUpperCase())}.

Commands:
${commandList(commands)}

Examples:
${commands.map(firstExample).join('\n')}

Run '${PROGRAM} ${group} SUBCOMMAND --help' for the details and more examples of each.`
}

/** The first line of a command's Examples section, for the group's help. */
function firstExample(command: Command): string {
  const lines = command.help.split('\n')
  const start = lines.findIndex((line) => line.trim() === 'Examples:')
  return lines[start + 1] ?? `  ${command.synopsis}`
}

function commandHelp(command: Command): string {
  // Every command opens the database, so DATABASE_URL applies to each.
  return [command.help, ENVIRONMENT, EXIT_STATUS].join('\n\n')
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
  return pkg.version
}

/** What a command line names: a command, a group, or nothing known. */
function resolve(words: string[]): { command?: Command; group?: string; used: number } {
  const [first, second] = words
  if (first === undefined) return { used: 0 }
  const single = COMMANDS.find((command) => command.name.length === 1 && command.name[0] === first)
  if (single !== undefined) return { command: single, used: 1 }
  if (GROUPS[first] === undefined) return { used: 0 }
  const sub = COMMANDS.find((command) => command.name[0] === first && command.name[1] === second)
  return sub === undefined ? { group: first, used: 1 } : { command: sub, used: 2 }
}

const COMMAND_NAMES = [...new Set(COMMANDS.map((command) => command.name[0]!))].join(', ')

async function dispatch(argv: string[], io: Io): Promise<number> {
  const beforeTerminator = argv.includes('--') ? argv.slice(0, argv.indexOf('--')) : argv
  const wantsHelp = beforeTerminator.some((arg) => arg === '--help' || arg === '-h')
  const [first] = argv

  if (first === undefined) {
    io.stderr.write(`${topHelp()}\n`)
    return 2
  }
  if (first === 'help') {
    const { command, group, used } = resolve(argv.slice(1))
    if (argv.length > 1 && used !== argv.length - 1) {
      throw new UsageError(`no help for ${JSON.stringify(argv.slice(1).join(' '))}: unknown command (commands: ${COMMAND_NAMES})`)
    }
    io.stdout.write(`${command !== undefined ? commandHelp(command) : group !== undefined ? groupHelp(group) : topHelp()}\n`)
    return 0
  }
  if (first === '--version' && argv.length === 1) {
    io.stdout.write(`${version()}\n`)
    return 0
  }
  if (first.startsWith('-')) {
    if (first === '--help' || first === '-h') {
      io.stdout.write(`${topHelp()}\n`)
      return 0
    }
    throw new UsageError(`unknown option ${first.replace(/=.*$/, '')} (commands: ${COMMAND_NAMES})`)
  }

  const { command, group, used } = resolve(argv)
  if (command === undefined && group === undefined) {
    throw new UsageError(`unknown command ${JSON.stringify(first)} (commands: ${COMMAND_NAMES})`)
  }
  if (command === undefined) {
    const next = argv[1]
    if (wantsHelp && (next === '--help' || next === '-h')) {
      io.stdout.write(`${groupHelp(group!)}\n`)
      return 0
    }
    if (next === undefined) {
      io.stderr.write(`${groupHelp(group!)}\n`)
      return 2
    }
    const subcommands = COMMANDS.filter((c) => c.name[0] === group).map((c) => c.name[1]).join(', ')
    throw new UsageError(`unknown ${group} command ${JSON.stringify(next)} (${group} commands: ${subcommands})`, group)
  }
  if (wantsHelp) {
    io.stdout.write(`${commandHelp(command)}\n`)
    return 0
  }
  try {
    const input = parseCommandArgs(command, argv.slice(used))
    // Before anything is done: a mistyped variable may be why the command then fails.
    if (command.logsWarnings !== true) {
      for (const unknown of unknownVariables(io.env)) io.stderr.write(`${PROGRAM}: warning: ${printable(unknownVariableWarning(unknown))}\n`)
    }
    await command.run(input, io)
  } catch (error) {
    if (error instanceof UsageError) error.command ??= command.name.join(' ')
    throw error
  }
  return 0
}

/** Runs one command line; returns the exit status. Every error ends as one line on stderr. */
export async function runCli(argv: string[], io: Io): Promise<number> {
  try {
    return await dispatch(argv, io)
  } catch (error) {
    // Whatever failed (a driver's error included) may quote a URL with its password.
    const message = redactUrl(error instanceof Error ? error.message : String(error))
    if (error instanceof UsageError) {
      const helpFor = error.command === undefined ? '' : ` ${error.command}`
      io.stderr.write(`${PROGRAM}: ${oneLine(message)}; see '${PROGRAM}${helpFor} --help'\n`)
      return 2
    }
    if (error instanceof ConfigError || error instanceof CommandError) {
      io.stderr.write(`${PROGRAM}: ${oneLine(message)}\n`)
      return 1
    }
    io.stderr.write(`${PROGRAM}: ${oneLine(message) || 'failed'}\n`)
    if (debugging(io.env) && error instanceof Error && error.stack !== undefined) io.stderr.write(`${redactUrl(error.stack)}\n`)
    return 1
  }
}
