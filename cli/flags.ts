// What every command of the CLI shares: the shape of a command's spec (name, arguments, summary,
// flags), the flags several commands take, the one parser (node:util's parseArgs, given exactly
// the flags the spec lists), and the help and usage text generated from the spec. A flag cannot be
// parsed without being documented: both come from the same entry.
//
// Each command is a module under cli/verbs/ with its spec and its run; cli/commands.ts assembles
// them into the table. This module imports node:util and the exit codes only, so every verb loads it.
import { parseArgs } from 'node:util'
import { ExitCode } from './exit-codes.js'

export const PROGRAM = 'hookgate'

export interface FlagSpec {
  /** long name without the dashes */
  name: string
  /** the value's placeholder (`DIR`, `N`); absent for an on/off flag */
  value?: string
  /** a value given when the flag is absent (also shown in the help) */
  default?: string
  /** may be given more than once */
  multiple?: boolean
  /** must be given (shown without brackets in the usage line) */
  required?: boolean
  description: string
}

export interface CommandSpec {
  /** the words typed after `hookgate`, e.g. `compile` or `webhooks gmail setup`; its module is cli/verbs/<words joined by ->.ts */
  name: string
  /** positional arguments as shown in the usage line, e.g. `[hooks.yaml]` */
  args: string
  summary: string
  flags: readonly FlagSpec[]
  /** more lines for its --help, after the flags */
  notes?: readonly string[]
  /** the commands whose names start with this one's (`runs` → `runs show`, `runs replay`): its help lists them */
  subcommands?: readonly CommandSpec[]
  /** it reads state (the run history, a store, hooks.yaml, a bundle) and prints what it found: it takes --json (test/cli/verbs.test.ts) */
  readsState?: true
}

/** Where a command's output goes: the process's stdout and stderr (tests pass their own). */
export interface CommandIO {
  stdout(text: string): void
  stderr(text: string): void
}

export const processIO: CommandIO = {
  stdout: (text: string) => { process.stdout.write(text) },
  stderr: (text: string) => { process.stderr.write(text) },
}

/** What a run may be given instead of the process's own: the clock and the environment (tests). */
export interface VerbContext {
  now?: () => number
  env?: NodeJS.ProcessEnv
}

/** A command: its spec and what runs it. Every module under cli/verbs/ is one (it imports the compiler, admin or gmail only when it runs). */
export interface Verb {
  spec: CommandSpec
  run(argv: string[], io?: CommandIO, context?: VerbContext): Promise<number>
}

// ---------------------------------------------------------------------------------------------
// Flags several commands take

/** --json on a command that reads state: what it prints instead of the text view. */
export function jsonFlag(what: string): FlagSpec {
  return { name: 'json', description: `print ${what} on stdout` }
}

/** runs, runs show and rejects: the history they read */
export const HISTORY_FLAGS: readonly FlagSpec[] = [
  { name: 'state', value: 'DIR', description: 'the state directory to read (default: .hookgate)' },
  { name: 'store', value: 'URL', description: 'read a PostgreSQL store (postgres://…) instead of the state directory' },
]

/** try, serve and tasks */
export const BUNDLE_FLAG: FlagSpec = { name: 'bundle', value: 'PATH', default: 'dist', description: 'the compiled bundle: the --out folder or the bundle file in it' }

/** The flags of every command that edits hooks.yaml and recompiles it (trigger|task add|rm). */
export const AGENT_FLAG: FlagSpec = { name: 'agent', value: 'ID', description: 'the agent (default: the default agent)' }
export const EDIT_FLAGS: readonly FlagSpec[] = [
  { name: 'config', value: 'FILE', default: 'hooks.yaml', description: 'the config to edit' },
  { name: 'out', value: 'DIR', default: 'dist', description: 'where the recompiled bundle is written (the folder `hookgate serve --bundle` reads)' },
  { name: 'state', value: 'DIR', description: 'the state directory: where a generated hook token is saved (default: server.stateDir, else .hookgate beside the config)' },
]

/** trigger list and task list */
export const LIST_FLAGS: readonly FlagSpec[] = [
  { name: 'agent', value: 'ID', description: 'only this agent\'s' },
  jsonFlag('them as a JSON array'),
  { name: 'config', value: 'FILE', default: 'hooks.yaml', description: 'the config to read' },
  { name: 'state', value: 'DIR', description: 'the state directory whose run history shows each last run (default: server.stateDir, else .hookgate beside the config)' },
]

/** webhooks gmail login|setup|run */
export const GMAIL_FLAGS: readonly FlagSpec[] = [
  { name: 'config', value: 'FILE', default: 'hooks.yaml', description: 'the config holding hooks.gmail' },
  { name: 'state', value: 'DIR', description: 'the state directory; the helper keeps its cursor, refresh token and push token in <state>/gmail (default: server.stateDir, else .hookgate beside the config)' },
]

/** The state directory a command reads when --state is not given. */
export const DEFAULT_STATE_DIR = '.hookgate'

/** A --limit, --count or similar: a whole number from 1 up to `max`, or undefined. */
export function wholeNumber(text: string, max = Infinity): number | undefined {
  return /^[1-9][0-9]*$/.test(text) && Number(text) <= max ? Number(text) : undefined
}

/** A --port: a whole number from 0 to 65535 (0 picks a free one), or undefined. */
export function portNumber(text: string): number | undefined {
  const port = Number(text)
  return Number.isInteger(port) && port >= 0 && port <= 65535 ? port : undefined
}

// ---------------------------------------------------------------------------------------------
// Help and usage, generated from the spec

function flagSynopsis(f: FlagSpec): string {
  const word = f.value ? `--${f.name} ${f.value}` : `--${f.name}`
  const repeated = f.multiple ? `${word} ...` : word
  return f.required ? repeated : `[${repeated}]`
}

/** `try <name> --payload FILE [--bundle PATH] …`: the command with every flag it takes */
export function synopsis(c: CommandSpec): string {
  return [c.name, c.args, ...c.flags.map(flagSynopsis)].filter(Boolean).join(' ')
}

/** `usage: hookgate try <name> --payload FILE [--bundle PATH] …` */
export function usageLine(c: CommandSpec): string {
  return `usage: ${PROGRAM} ${synopsis(c)}`
}

/** What `hookgate <command> --help` prints: usage, summary, every flag with its description. */
export function commandHelp(c: CommandSpec): string {
  const rows: Array<[string, string]> = c.flags.map((f) => [
    f.value ? `--${f.name} ${f.value}` : `--${f.name}`,
    f.description + (f.default !== undefined ? ` (default: ${f.default})` : '') + (f.required ? ' (required)' : ''),
  ])
  rows.push(['-h, --help', 'show this help'])
  const width = Math.max(...rows.map(([l]) => l.length))
  const lines = [usageLine(c), '', c.summary, '', 'options:', ...rows.map(([l, d]) => `  ${l.padEnd(width)}  ${d}`)]
  if (c.notes?.length) lines.push('', ...c.notes)
  // a command that also groups others (`runs`, `runs show`): its help names them too
  if (c.subcommands?.length) lines.push('', 'commands:', ...c.subcommands.map((m) => `  ${synopsis(m)}\n      ${m.summary}`))
  return lines.join('\n') + '\n'
}

/** Whether argv asks for help (before a `--` that ends the options). */
export function wantsHelp(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === '--') return false
    if (a === '--help' || a === '-h') return true
  }
  return false
}

// ---------------------------------------------------------------------------------------------
// The parser

export type ParsedCommand =
  | { kind: 'help' }
  | { kind: 'usage-error'; message: string }
  | { kind: 'ok'; values: Record<string, string | boolean | string[] | undefined>; positionals: string[] }

/** Parses argv with exactly the flags the spec lists (plus -h/--help). */
export function parseCommandArgs(c: CommandSpec, argv: readonly string[]): ParsedCommand {
  if (wantsHelp(argv)) return { kind: 'help' }
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; default?: string | string[] }> = {}
  for (const f of c.flags) {
    options[f.name] = f.value
      ? { type: 'string', ...(f.multiple ? { multiple: true, default: f.default !== undefined ? [f.default] : [] } : f.default !== undefined ? { default: f.default } : {}) }
      : { type: 'boolean' }
  }
  try {
    const { values, positionals } = parseArgs({ args: [...argv], options, allowPositionals: c.args !== '', strict: true })
    // the spec marks them required: the usage line shows them without brackets, and so they are
    const missing = c.flags.filter((f) => f.required && f.default === undefined && (values[f.name] === undefined || values[f.name] === ''))
    if (missing.length > 0) return { kind: 'usage-error', message: `missing ${missing.map((f) => `--${f.name}`).join(', ')}` }
    return { kind: 'ok', values: values as Record<string, string | boolean | string[] | undefined>, positionals }
  } catch (err) {
    return { kind: 'usage-error', message: (err as Error).message }
  }
}

/**
 * The shared front of every command: help on stdout (exit 0), a usage error with the usage line on
 * stderr (exit 2), else the parsed flags.
 */
export function readCommandArgs(c: CommandSpec, argv: readonly string[], io: CommandIO = processIO): { kind: 'ok'; values: Record<string, string | boolean | string[] | undefined>; positionals: string[] } | { kind: 'help' | 'usage-error'; exit: number } {
  const parsed = parseCommandArgs(c, argv)
  if (parsed.kind === 'help') {
    io.stdout(commandHelp(c))
    return { kind: 'help', exit: ExitCode.ok }
  }
  if (parsed.kind === 'usage-error') {
    io.stderr(`${PROGRAM} ${c.name}: ${parsed.message}\n${usageLine(c)}\n`)
    return { kind: 'usage-error', exit: ExitCode.usage }
  }
  return parsed
}

/** `hookgate <command>: <why>` and the usage line on stderr; the usage error's exit code. */
export function usageError(c: CommandSpec, why: string, io: CommandIO): number {
  io.stderr(`${PROGRAM} ${c.name}: ${why}\n${usageLine(c)}\n`)
  return ExitCode.usage
}

/**
 * Runs a command's work, and says a refusal it throws (a config problem, a refusal by Google: a
 * sentence meant for the operator) in one line on stderr, exit 1, never with a stack.
 */
export async function sayingRefusals(c: CommandSpec, io: CommandIO, work: () => Promise<number>): Promise<number> {
  try {
    return await work()
  } catch (err) {
    io.stderr(`${PROGRAM} ${c.name}: ${(err as Error).message}\n`)
    return ExitCode.refused
  }
}
