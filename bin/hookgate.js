#!/usr/bin/env node
// The hookgate executable: finds the command in the command table (cli/commands.ts) and
// dispatches to the compiler CLI or the runtime CLI. The runtime side never loads compiler code,
// so a host with only the runtime and a bundle can `hookgate serve`.
import { existsSync, readFileSync } from 'node:fs'

const argv = process.argv.slice(2)
const build = new URL('../build/', import.meta.url)
if (!existsSync(new URL('cli/commands.js', build))) {
  process.stderr.write('hookgate: the build/ folder is missing; run `npm ci` (or `npm run build`) in the hookgate checkout\n')
  process.exit(2)
}
// `serve` loads the runtime bundled into one file (scripts/build.mjs), which also holds the command
// table: resolving and reading its ~50 modules one by one was a sixth of the start.
const serveBundle = new URL('serve/hookgate-serve.mjs', build)
const bundled = argv[0] === 'serve' && existsSync(serveBundle)
const table = await import((bundled ? serveBundle : new URL('cli/commands.js', build)).href)

/** Runs a command's module, or says the build lacks it (exit 2). */
async function run(command, rest) {
  if (table.wantsHelp(rest)) {
    process.stdout.write(table.commandHelp(command))
    return 0
  }
  const side = command.side
  const module = side === 'compiler' ? 'cli/compiler-cli.js' : side === 'runtime' ? 'cli/runtime-cli.js' : side === 'admin' ? 'cli/admin-cli.js' : side === 'gmail' ? 'cli/gmail-cli.js' : side === 'import-openclaw' ? 'compiler/import-openclaw.js' : null
  if (module === null || !existsSync(new URL(module, build))) {
    process.stderr.write(`hookgate ${command.name}: not available in this build yet\n${table.usageLine(command)}\n`)
    return 2
  }
  const loaded = bundled && side === 'runtime' ? table : await import(new URL(module, build).href)
  // import-openclaw's main takes the words after `import` (it names the source itself)
  return side === 'import-openclaw' ? loaded.main(['openclaw', ...rest]) : loaded.main(command.name, rest)
}

let code
try {
  const [first] = argv
  const found = table.findCommand(argv)
  const groups = table.commandGroups()
  if (found) {
    code = await run(found.command, found.rest)
  } else if (first === '--version' || first === '-v' || first === 'version') {
    // read from package.json here, so neither side is loaded for it
    process.stdout.write(`hookgate ${JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version}\n`)
    code = 0
  } else if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    // `help <command>` is that command's help; missing command: a usage error on stderr and 2.
    const asked = first === 'help' ? argv.slice(1) : []
    const named = asked.length > 0 ? table.findCommand(asked) : undefined
    if (asked.length > 0 && named && named.rest.length === 0) process.stdout.write(table.commandHelp(named.command))
    else if (asked.length > 0 && groups.has(asked.join(' '))) process.stdout.write(table.groupHelp(asked.join(' ')))
    else if (asked.length > 0) {
      process.stderr.write(`hookgate help: no command "${asked.join(' ')}"\n${table.topLevelHelp()}`)
      code = 2
    } else (first === undefined ? process.stderr : process.stdout).write(table.topLevelHelp())
    code ??= first === undefined ? 2 : 0
  } else {
    // The longest group the words name (`webhooks gmail`): its help when asked, else its usage.
    let group
    for (let n = argv.length; n > 0 && !group; n--) if (groups.has(argv.slice(0, n).join(' '))) group = argv.slice(0, n).join(' ')
    if (group !== undefined && table.wantsHelp(argv.slice(group.split(' ').length))) {
      process.stdout.write(table.groupHelp(group))
      code = 0
    } else if (group !== undefined) {
      const next = argv[group.split(' ').length]
      process.stderr.write(`hookgate ${group}: ${next === undefined ? 'name a command' : `unknown command "${next}"`}\n${table.groupHelp(group)}`)
      code = 2
    } else {
      process.stderr.write(`hookgate: unknown command "${first}"\n${table.topLevelHelp()}`)
      code = 2
    }
  }
} catch (err) {
  process.stderr.write(`hookgate: internal error: ${err && err.message ? err.message : String(err)}\n`)
  code = 2
}
if (code !== undefined) process.exitCode = code
