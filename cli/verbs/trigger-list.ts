// `hookgate trigger list`: the Webhook Triggers in hooks.yaml with their endpoint and last run (cli/definitions.ts).
import { LIST_FLAGS, processIO, type CommandIO, type CommandSpec } from '../flags.js'
import { listDefinitions } from '../definitions.js'

export const spec: CommandSpec = {
  name: 'trigger list',
  readsState: true,
  args: '',
  summary: 'list the Webhook Triggers in hooks.yaml with their endpoint and last run',
  flags: [
    ...LIST_FLAGS,
  ],
}

export function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  return listDefinitions(spec, 'trigger', argv, io)
}
