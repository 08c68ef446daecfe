// `hookgate task list`: the scheduled Tasks in hooks.yaml with their next firing and last run (cli/definitions.ts).
import { LIST_FLAGS, processIO, type CommandIO, type CommandSpec } from '../flags.js'
import { listDefinitions } from '../definitions.js'

export const spec: CommandSpec = {
  name: 'task list',
  readsState: true,
  args: '',
  summary: 'list the scheduled Tasks in hooks.yaml with their next firing and last run',
  flags: [
    ...LIST_FLAGS,
  ],
}

export function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  return listDefinitions(spec, 'task', argv, io)
}
