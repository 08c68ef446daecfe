#!/usr/bin/env node
// The hookgate executable: finds the verb the words name and imports that verb's module alone,
// build/cli/verbs/<words joined by ->.js (cli/commands.ts names each so), which loads what it needs
// when it runs. The runtime's verbs never load compiler code, so a host with only the runtime and
// a bundle can `hookgate serve`. The help, a group's help and an unknown command load the command
// table (build/cli/commands.js), which holds every verb's spec.
import { existsSync, readFileSync } from 'node:fs'

const argv = process.argv.slice(2)
// A reader that goes away (`hookgate schema | head -3`) ends the output, not the process with a
// stack trace: what was asked for has been read as far as the reader wanted. `serve` goes on
// serving (its log lines are lost until it is restarted with a reader); every other verb exits 0.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err
  if (argv[0] !== 'serve') process.exit(0)
})
const build = new URL('../build/', import.meta.url)
if (!existsSync(new URL('cli/commands.js', build))) {
  process.stderr.write('hookgate: the build/ folder is missing; run `npm ci` (or `npm run build`) in the hookgate checkout\n')
  // ExitCode.usage (cli/exit-codes.ts), which lives in the missing build
  process.exit(2)
}

const { ExitCode } = await import(new URL('cli/exit-codes.js', build).href)

/** The verb module the first words name: the longest run of plain words with a module of that name. */
function verbModule() {
  // `serve` loads the runtime bundled into one file (scripts/build.mjs, cli/serve-main.ts):
  // resolving and reading its ~50 modules one by one was a sixth of the start.
  const serveBundle = new URL('serve/hookgate-serve.mjs', build)
  if (argv[0] === 'serve' && existsSync(serveBundle)) return { url: serveBundle, rest: argv.slice(1) }
  for (let n = Math.min(argv.length, 4); n > 0; n--) {
    const words = argv.slice(0, n)
    if (!words.every((w) => /^[a-z]+$/.test(w))) continue
    const url = new URL(`cli/verbs/${words.join('-')}.js`, build)
    if (existsSync(url)) return { url, rest: argv.slice(n) }
  }
  return undefined
}

/** No verb named: the version, the help, a group's help, or an unknown command (usage on stderr, 2). */
async function withoutVerb() {
  const table = await import(new URL('cli/commands.js', build).href)
  const [first] = argv
  const groups = table.commandGroups()
  if (first === '--version' || first === '-v' || first === 'version') {
    // read from package.json here, so that no verb is loaded for it
    process.stdout.write(`hookgate ${JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version}\n`)
    return ExitCode.ok
  }
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    // `help <command>` is that command's help; missing command: a usage error on stderr and 2.
    const asked = first === 'help' ? argv.slice(1) : []
    const named = asked.length > 0 ? table.findCommand(asked) : undefined
    if (asked.length > 0 && named && named.rest.length === 0) process.stdout.write(table.commandHelp(named.command))
    else if (asked.length > 0 && groups.has(asked.join(' '))) process.stdout.write(table.groupHelp(asked.join(' ')))
    else if (asked.length > 0) {
      process.stderr.write(`hookgate help: no command "${asked.join(' ')}"\n${table.topLevelHelp()}`)
      return ExitCode.usage
    } else {
      (first === undefined ? process.stderr : process.stdout).write(table.topLevelHelp())
      return first === undefined ? ExitCode.usage : ExitCode.ok
    }
    return ExitCode.ok
  }
  // The longest group the words name (`webhooks gmail`): its help when asked, else its usage.
  let group
  for (let n = argv.length; n > 0 && !group; n--) if (groups.has(argv.slice(0, n).join(' '))) group = argv.slice(0, n).join(' ')
  if (group !== undefined && table.wantsHelp(argv.slice(group.split(' ').length))) {
    process.stdout.write(table.groupHelp(group))
    return ExitCode.ok
  }
  if (group !== undefined) {
    const next = argv[group.split(' ').length]
    process.stderr.write(`hookgate ${group}: ${next === undefined ? 'name a command' : `unknown command "${next}"`}\n${table.groupHelp(group)}`)
    return ExitCode.usage
  }
  process.stderr.write(`hookgate: unknown command "${first}"\n${table.topLevelHelp()}`)
  return ExitCode.usage
}

let code
try {
  const found = verbModule()
  // a verb answers its own --help and usage errors (cli/flags.ts)
  code = found ? await (await import(found.url.href)).run(found.rest) : await withoutVerb()
} catch (err) {
  process.stderr.write(`hookgate: internal error: ${err && err.message ? err.message : String(err)}\n`)
  code = ExitCode.internal
}
if (code !== undefined) process.exitCode = code
