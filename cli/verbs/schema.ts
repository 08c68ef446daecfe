// `hookgate schema`: the JSON Schema of hooks.yaml (compiler/schema.ts), for editors. `hookgate schema
// infer` (schema-infer.ts) drafts a payload's schema from samples.
import { ExitCode } from '../exit-codes.js'
import { processIO, readCommandArgs, type CommandIO, type CommandSpec } from '../flags.js'
import { spec as inferSpec } from './schema-infer.js'

export const spec: CommandSpec = {
  name: 'schema',
  args: '',
  summary: 'print the JSON Schema of hooks.yaml (for editors)',
  flags: [],
  subcommands: [inferSpec],
}

export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const { jsonSchemaDocument } = await import('../../compiler/schema.js')
  io.stdout(JSON.stringify(jsonSchemaDocument(), null, 2) + '\n')
  return ExitCode.ok
}
