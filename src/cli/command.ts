import { parseArgs } from 'node:util'
import { loadDatabaseConfig } from '../config.js'
import type { Store } from '../store/store.js'
import { databaseCreatedNotice, databaseMissingMessage, databaseToCreate } from './new-database.js'

export const PROGRAM = 'petstore-orders'

/** The command line itself is wrong (unknown command or option, missing or bad argument): exit 2. */
export class UsageError extends Error {
  /**
   * The command whose `--help` explains the right usage, e.g. `keys create`; one thrown while a
   * command parses or runs gets that command's name (runCli's dispatch).
   */
  command: string | undefined
  constructor(message: string, command?: string) {
    super(message)
    this.name = 'UsageError'
    this.command = command
  }
}

/** The command was understood but could not be done (not found, refused, bad file …): exit 1. */
export class CommandError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'CommandError'
  }
}

export interface OutputStream {
  isTTY?: boolean
  columns?: number
  /** `done` is called once the text is written, or with the error that stopped it. */
  write(text: string, done?: (error?: Error | null) => void): unknown
}

/**
 * Writes `text` and waits until it is written. A process's stdout that cannot be written (a full
 * disk, a closed pipe) ends the process in its own error handler (main.ts) before this settles:
 * what the caller does after it, it does only once the text is out.
 */
export function written(stream: OutputStream, text: string): Promise<void> {
  return new Promise((resolve, reject) => stream.write(text, (error) => (error ? reject(error) : resolve())))
}

export interface Io {
  stdout: OutputStream
  stderr: OutputStream
  env: Record<string, string | undefined>
}

/** `multiple`: the option may be given more than once; its value is then the list of them all. */
type OptionSpec = Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }>
export type OptionValues = Record<string, string | string[] | boolean | undefined>

export interface Command {
  /** The words that name it: `['keys', 'create']`. */
  name: string[]
  /** How the list of commands shows it: the words and the required arguments. */
  synopsis: string
  /** One line for the list of commands. */
  summary: string
  /** The full `--help` text (without the common footer). */
  help: string
  /** Its options besides `--help`; none when left out. */
  options?: OptionSpec
  /** Names of the positional arguments, all required, e.g. `['ID']`; none when left out. */
  positionals?: { name: string; describe: string }[]
  /** Logs its warnings (unknown variables) in its own JSON log, not on stderr: serve. */
  logsWarnings?: boolean
  run(input: { values: OptionValues; positionals: string[] }, io: Io): Promise<void>
}

const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const

/** Parses a command's arguments strictly; any problem is a UsageError. */
export function parseCommandArgs(command: Command, args: string[]): { values: OptionValues; positionals: string[] } {
  const options: OptionSpec = { ...command.options, ...HELP_OPTION }
  let parsed: { values: OptionValues; positionals: string[]; tokens: { kind: string; name?: string }[] }
  try {
    parsed = parseArgs({ args, options, strict: true, allowPositionals: true, tokens: true }) as typeof parsed
  } catch (error) {
    throw new UsageError(parseArgsProblem(error as Error & { code?: string }))
  }
  // An option given twice that takes one value: parseArgs keeps the last, silently; which was meant?
  const given = new Set<string>()
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue
    const name = token.name!
    if (name === 'help' || options[name]?.multiple === true) continue
    if (given.has(name)) throw new UsageError(`option --${name} is given more than once`)
    given.add(name)
  }
  const expected = command.positionals ?? []
  if (parsed.positionals.length < expected.length) {
    const missing = expected[parsed.positionals.length]!
    throw new UsageError(`missing ${missing.name} (${missing.describe})`)
  }
  if (parsed.positionals.length > expected.length) {
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[expected.length])}`)
  }
  return parsed
}

/** node:util's messages, made short and lowercase to fit the one-line error. */
function parseArgsProblem(error: Error & { code?: string }): string {
  const first = error.message.split('\n')[0] ?? error.message
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const option = /'([^']+)'/.exec(first)?.[1]
      return option === undefined ? lowerFirst(first) : `unknown option ${option}`
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL': {
      const argument = /'([^']*)'/.exec(first)?.[1]
      return argument === undefined ? lowerFirst(first) : `unexpected argument ${JSON.stringify(argument)}`
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const option = /--[a-z-]+/.exec(first)?.[0] ?? 'an option'
      if (/argument missing/.test(first)) return `option ${option} needs a value`
      if (/does not take an argument/.test(first)) return `option ${option} does not take a value`
      if (/ambiguous/.test(first)) return `the value of ${option} starts with "-"; write it as ${option}=VALUE`
      return lowerFirst(first)
    }
    default:
      return lowerFirst(first)
  }
}

export function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1)
}

/** An option's string value, or undefined when absent. */
export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name]
  return typeof value === 'string' ? value : undefined
}

/** The values of an option given `multiple` times, in the order given; none when absent. */
export function stringsOption(values: OptionValues, name: string): string[] {
  const value = values[name]
  return Array.isArray(value) ? value : typeof value === 'string' ? [value] : []
}

/**
 * How long a command waits for a PostgreSQL connection, new or from its pool, before it says the
 * database is unavailable: longer than the server's 2 s, which answers a request; a command is an
 * operator's, run once, and a loaded database server can take seconds to start a backend.
 */
const CLI_CONNECT_TIMEOUT_MS = 10_000

/**
 * Opens the store DATABASE_URL names (a bad value is a ConfigError), migrates it, runs `work`
 * and closes the store whatever happens. A SQLite file that does not exist is created only with
 * `createDatabase` (the commands that set a database up), and said on stderr; without it, it is a
 * CommandError naming the path, and neither the file nor its directory is made.
 */
export async function withStore<T>(
  io: Io,
  work: (store: Store) => Promise<T>,
  options: { migrate?: boolean; createDatabase?: boolean } = {},
): Promise<T> {
  const database = loadDatabaseConfig(io.env)
  const create = options.createDatabase === true
  const toCreate = databaseToCreate(database)
  if (toCreate !== undefined && !create) throw new CommandError(databaseMissingMessage(io.env, toCreate))
  // Loaded when a command needs it: `--help` and usage errors stay fast.
  const { openStore, removeUnusedDatabase, SqliteFileMissingError } = await import('../store/open-store.js')
  let store: Store
  try {
    // Must exist: a file removed since the check above is refused, not made anew.
    store = await openStore(database, { mustExist: !create }, { connectionTimeoutMillis: CLI_CONNECT_TIMEOUT_MS })
  } catch (error) {
    if (error instanceof SqliteFileMissingError) throw new CommandError(databaseMissingMessage(io.env, error.path), { cause: error })
    throw error
  }
  let done = false
  try {
    if (options.migrate !== false) await store.migrate()
    const result = await work(store)
    done = true
    return result
  } finally {
    await store.close()
    // A database made for a command that then failed (a bad import file, say) is removed: nothing is
    // left half-written, and the next command at a mistyped path is refused again. Not one another
    // command has come to use meanwhile (removeUnusedDatabase).
    if (done) sayNotice(io, databaseCreatedNotice(io.env, toCreate))
    else if (toCreate !== undefined) removeUnusedDatabase(toCreate)
  }
}

/**
 * Rows under a header of `columns`, aligned, on a terminal; piped, tab-separated with no header.
 * On a terminal, `empty` is said on stderr when there is no row.
 */
export function printRows(io: Io, columns: readonly string[], rows: string[][], empty: string): void {
  if (io.stdout.isTTY !== true) {
    for (const row of rows) io.stdout.write(`${row.join('\t')}\n`)
    return
  }
  if (rows.length === 0) {
    io.stderr.write(`${empty}\n`)
    return
  }
  const table = [[...columns], ...rows]
  const widths = columns.map((_, i) => Math.max(...table.map((row) => [...row[i]!].length)))
  for (const row of table) {
    io.stdout.write(`${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')}\n`)
  }
}

/** A `petstore-orders: …` line on stderr, when there is something to say. */
export function sayNotice(io: Io, notice: string | undefined): void {
  if (notice !== undefined) io.stderr.write(`${PROGRAM}: ${notice}\n`)
}

/** One line: the error message of a thrown value, newlines folded. */
export function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ').trim()
}

/** A name as one line of output: control characters escaped. */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f]/g, (c) => JSON.stringify(c).slice(1, -1))
}
