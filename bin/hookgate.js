#!/usr/bin/env node
// The hookgate executable: dispatches to the compiler CLI or the runtime CLI. The runtime side
// never loads compiler code, so a host with only the runtime and a bundle can `hookgate serve`.
import { existsSync } from 'node:fs'

const USAGE = `usage: hookgate <command> [options]

commands:
  compile [hooks.yaml] [--out dist] [--check] [--format text|json|github]   compile the config into a bundle
  schema                                                                     print the JSON Schema of hooks.yaml
  try <name> --payload FILE [--bundle dist] [--header K:V] [--query k=v]     show what a mapping does with a payload
  serve [--bundle dist] [--host 127.0.0.1] [--port 8787] [--state DIR]       serve a compiled bundle
  runs [--state DIR] [--json] [--limit N]                                    show run history
  import openclaw FILE [--out hooks.yaml] [--force]                          convert an OpenClaw hooks config
`

const [command, ...rest] = process.argv.slice(2)
const build = new URL('../build/', import.meta.url)
if (!existsSync(new URL('compiler/cli.js', build)) && !existsSync(new URL('runtime/cli.js', build))) {
  process.stderr.write('hookgate: the build/ folder is missing; run `npm ci` (or `npm run build`) in the hookgate checkout\n')
  process.exit(2)
}

let code
try {
  if (command === 'compile' || command === 'schema') {
    code = await (await import(new URL('compiler/cli.js', build).href)).main(command, rest)
  } else if (command === 'import') {
    code = await (await import(new URL('compiler/import-openclaw.js', build).href)).main(rest)
  } else if (command === 'serve' || command === 'runs' || command === 'try' || command === 'webhooks') {
    code = await (await import(new URL('runtime/cli.js', build).href)).main(command, rest)
  } else if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    // Asked for: stdout and 0; missing command: a usage error on stderr and 2.
    ;(command === undefined ? process.stderr : process.stdout).write(USAGE)
    code = command === undefined ? 2 : 0
  } else {
    process.stderr.write(`hookgate: unknown command "${command}"\n${USAGE}`)
    code = 2
  }
} catch (err) {
  process.stderr.write(`hookgate: internal error: ${err && err.message ? err.message : String(err)}\n`)
  code = 2
}
if (code !== undefined) process.exitCode = code
