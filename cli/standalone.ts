// The entry point of the standalone runtime: `hookgate compile --standalone` bundles this file, the
// runtime and undici into dist/hookgate-serve.mjs, so a host with Node and dist/ alone runs
// `node dist/hookgate-serve.mjs [serve|runs|try] [flags]` with the flags of `hookgate serve` (or
// `runs`, `try`); serve is the default, and the bundle is the folder this file sits in.
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { main } from './runtime-cli.js'

const COMMANDS = new Set(['serve', 'runs', 'try'])
const EXIT_INTERNAL = 2

const args = process.argv.slice(2)
const command = COMMANDS.has(args[0]!) ? args.shift()! : 'serve'
// parseArgs keeps the last of a repeated flag, so a --bundle given on the command line wins
const argv = command === 'runs' ? args : ['--bundle', dirname(fileURLToPath(import.meta.url)), ...args]
try {
  const code = await main(command, argv)
  if (code !== undefined) process.exitCode = code
} catch (err) {
  process.stderr.write(`hookgate: internal error: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exitCode = EXIT_INTERNAL
}
