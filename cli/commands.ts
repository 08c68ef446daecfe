// The one table of hookgate's commands, assembled from the verbs: each command is a module under
// cli/verbs/ named after its words (`runs show` → runs-show.ts) that holds its spec (name, summary,
// arguments, flags) and its run. The top-level help, each group's help and the usage lines are
// generated from it (each command's own --help from its spec, cli/flags.ts), and so is the CLI
// reference (docs/reference/cli.md, scripts/docs.mjs), so a flag cannot be parsed without being
// documented; a test walks the table.
//
// bin/hookgate.js imports only the verb it runs; it loads this table for the help, a group's help
// and an unknown command. A verb imports the compiler, the control plane or the Gmail helper only
// when it runs, so neither this table nor a runtime command ever loads them (test/cli/verbs.test.ts);
// the runtime's modules a verb imports as usual, so that the bundles of `serve` (build/serve/) and
// of `compile --standalone` hold the runtime as plain modules, not behind lazy loaders.
import { ExitCode } from './exit-codes.js'
import { PROGRAM, synopsis, type CommandSpec, type Verb } from './flags.js'
import * as compile from './verbs/compile.js'
import * as schema from './verbs/schema.js'
import * as schemaInfer from './verbs/schema-infer.js'
import * as tryVerb from './verbs/try.js'
import * as serve from './verbs/serve.js'
import * as runs from './verbs/runs.js'
import * as runsShow from './verbs/runs-show.js'
import * as runsReplay from './verbs/runs-replay.js'
import * as tasks from './verbs/tasks.js'
import * as rejects from './verbs/rejects.js'
import * as storeMigrate from './verbs/store-migrate.js'
import * as admin from './verbs/admin.js'
import * as triggerAdd from './verbs/trigger-add.js'
import * as triggerList from './verbs/trigger-list.js'
import * as triggerRm from './verbs/trigger-rm.js'
import * as taskAdd from './verbs/task-add.js'
import * as taskList from './verbs/task-list.js'
import * as taskRm from './verbs/task-rm.js'
import * as importOpenclaw from './verbs/import-openclaw.js'
import * as gmailLogin from './verbs/webhooks-gmail-login.js'
import * as gmailSetup from './verbs/webhooks-gmail-setup.js'
import * as gmailRun from './verbs/webhooks-gmail-run.js'

export { ExitCode }
export { commandHelp, synopsis, usageLine, wantsHelp, type CommandSpec, type FlagSpec, type Verb } from './flags.js'

/** Every verb, in the order the help lists them. */
export const VERBS: readonly Verb[] = [
  compile, schema, schemaInfer, tryVerb, serve, runs, runsShow, runsReplay, tasks, rejects, storeMigrate,
  admin, triggerAdd, triggerList, triggerRm, taskAdd, taskList, taskRm, importOpenclaw,
  gmailLogin, gmailSetup, gmailRun,
]

export const COMMANDS: readonly CommandSpec[] = VERBS.map((v) => v.spec)

/** The file a command's module has under cli/verbs/ (bin/hookgate.js finds a verb by it). */
export function verbFile(name: string): string {
  return `${name.split(' ').join('-')}.js`
}

/** The verb the words of argv name (the longest match), and the words after it. */
export function findVerb(argv: readonly string[]): { verb: Verb; rest: string[] } | undefined {
  let best: Verb | undefined
  for (const v of VERBS) {
    const words = v.spec.name.split(' ')
    if (words.every((w, i) => argv[i] === w) && (!best || words.length > best.spec.name.split(' ').length)) best = v
  }
  return best && { verb: best, rest: argv.slice(best.spec.name.split(' ').length) }
}

/** The command the words of argv name (the longest match), and the words after it. */
export function findCommand(argv: readonly string[]): { command: CommandSpec; rest: string[] } | undefined {
  const found = findVerb(argv)
  return found && { command: found.verb.spec, rest: found.rest }
}

/** Words that only group subcommands (`import`, `webhooks`, `webhooks gmail`), each with its members. */
export function commandGroups(): Map<string, CommandSpec[]> {
  const groups = new Map<string, CommandSpec[]>()
  for (const c of COMMANDS) {
    const words = c.name.split(' ')
    for (let n = 1; n < words.length; n++) {
      const prefix = words.slice(0, n).join(' ')
      groups.set(prefix, [...(groups.get(prefix) ?? []), c])
    }
  }
  return groups
}

export function getCommand(name: string): CommandSpec {
  const c = COMMANDS.find((x) => x.name === name)
  if (!c) throw new Error(`no command "${name}" in the command table`)
  return c
}

/** What `hookgate <group> --help` prints, e.g. for `webhooks gmail`. */
export function groupHelp(group: string): string {
  const members = commandGroups().get(group) ?? []
  return [`usage: ${PROGRAM} ${group} <command> [options]`, '', 'commands:', ...members.map((c) => `  ${synopsis(c)}\n      ${c.summary}`), '', `run \`${PROGRAM} ${group} <command> --help\` for one command's options`].join('\n') + '\n'
}

/** What `hookgate --help` prints: every command with its full usage line and summary. */
export function topLevelHelp(): string {
  return [
    `usage: ${PROGRAM} <command> [options]`,
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${synopsis(c)}\n      ${c.summary}`),
    '',
    '  help [command]',
    "      this help, or one command's",
    '  --version, -v',
    '      print the version',
    '',
    `run \`${PROGRAM} <command> --help\` for a command's options and defaults`,
  ].join('\n') + '\n'
}
