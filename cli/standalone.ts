// The entry point of the standalone runtime: `hookgate compile --standalone` bundles this file, the
// runtime and undici into dist/hookgate-serve.mjs, so a host with Node and dist/ alone runs
// `node dist/hookgate-serve.mjs [serve|runs|try] [flags]` with the flags of `hookgate serve` (or
// `runs`, `try`); serve is the default, and the bundle is the folder this file sits in.
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ExitCode } from './exit-codes.js'
import type { Verb } from './flags.js'
import * as serve from './verbs/serve.js'
import * as runs from './verbs/runs.js'
import * as tryVerb from './verbs/try.js'

const VERBS: Record<string, Verb> = { serve, runs, try: tryVerb }

const args = process.argv.slice(2)
const command = Object.hasOwn(VERBS, args[0]!) ? args.shift()! : 'serve'
// parseArgs keeps the last of a repeated flag, so a --bundle given on the command line wins
const argv = command === 'runs' ? args : ['--bundle', dirname(fileURLToPath(import.meta.url)), ...args]
try {
  process.exitCode = await VERBS[command]!.run(argv)
} catch (err) {
  process.stderr.write(`hookgate: internal error: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exitCode = ExitCode.internal
}
