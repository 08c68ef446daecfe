// `hookgate try <name> --payload FILE`: what a mapping, /wake or /agent would answer for a payload,
// without serving: the bundle loaded as serve loads it, the request prepared as serve prepares it
// (runtime/endpoints/try.ts), the answer printed as JSON. Exit 0 for a 2xx answer, 1 otherwise.
import { readFileSync } from 'node:fs'
import { ExitCode } from '../exit-codes.js'
import { BUNDLE_FLAG, processIO, readCommandArgs, usageLine, type CommandIO, type CommandSpec } from '../flags.js'
import { BundleLoadError, loadBundle } from '../../runtime/bundle/load.js'
import { hookName } from '../../runtime/bundle/hook-path.js'
import { dryRun } from '../../runtime/endpoints/try.js'

export const spec: CommandSpec = {
  name: 'try',
  args: '<name>',
  summary: 'show what a mapping, /wake or /agent would answer for a payload, without serving',
  flags: [
    { name: 'payload', value: 'FILE', required: true, description: 'the request body (JSON) to try' },
    BUNDLE_FLAG,
    { name: 'header', value: 'K:V', multiple: true, description: 'a request header the mapping sees (repeatable)' },
    { name: 'query', value: 'k=v', multiple: true, description: 'a query parameter the mapping sees (repeatable)' },
  ],
  notes: [
    '<name> is a mapping path under the base path, or `wake` / `agent` for the built-in endpoints',
    'exit 0 when the answer would be 2xx, 1 otherwise, 2 on a usage error',
  ],
}

export const TRY_USAGE = usageLine(spec)

/** What a mapping would answer for a sample payload; exit 0 for 2xx, 1 otherwise, 2 for usage. */
export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const { positionals } = parsed
  const values = parsed.values as { payload?: string; bundle: string; header: string[]; query: string[] }
  if (positionals.length !== 1 || !values.payload) {
    io.stderr(`hookgate try: need one mapping name and --payload FILE\n${TRY_USAGE}\n`)
    return ExitCode.usage
  }
  const headers: Record<string, string> = Object.create(null)
  for (const h of values.header) {
    const i = h.indexOf(':')
    if (i <= 0) {
      io.stderr(`hookgate try: --header takes NAME:VALUE, not "${h}"\n`)
      return ExitCode.usage
    }
    headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim()
  }
  const query: Record<string, string> = Object.create(null)
  for (const q of values.query) {
    const i = q.indexOf('=')
    query[i < 0 ? q : q.slice(0, i)] = i < 0 ? '' : q.slice(i + 1)
  }
  let bundle
  try {
    bundle = await loadBundle(values.bundle)
  } catch (err) {
    io.stderr(`hookgate try: ${err instanceof BundleLoadError ? err.message : (err as Error).message}\n`)
    return ExitCode.usage
  }
  let text: string
  try {
    text = readFileSync(values.payload, 'utf8')
  } catch (err) {
    io.stderr(`hookgate try: cannot read ${values.payload}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}\n`)
    return ExitCode.usage
  }

  const basePrefix = bundle.config.basePath.slice(1) + '/'
  const asked = positionals[0]!.replace(/^\/+/, '').replace(new RegExp('^' + basePrefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), '')
  // As the compiler named the routes (runtime/bundle/hook-path.ts); a name it would refuse is looked up as given, and not found.
  const name = hookName(asked) ?? asked
  const print = (status: number, body: Record<string, unknown>) => {
    io.stdout(JSON.stringify({ status, ...body }, null, 2) + '\n')
    return status < 300 ? ExitCode.ok : ExitCode.refused
  }

  let payload: unknown
  try {
    payload = text.trim() === '' ? {} : JSON.parse(text)
  } catch (err) {
    return print(400, { code: 'invalid_json', error: `the payload is not valid JSON: ${(err as Error).message}` })
  }
  const answer = await dryRun(bundle, name, payload, { headers, query })
  return print(answer.status, answer.body)
}
