// `hookgate task rm NAME`: a scheduled Task removed from hooks.yaml, then recompiled (cli/definitions.ts).
import { AGENT_FLAG, EDIT_FLAGS, processIO, type CommandIO, type CommandSpec } from '../flags.js'
import { removeDefinition } from '../definitions.js'

export const spec: CommandSpec = {
  name: 'task rm',
  args: 'NAME',
  summary: 'remove a scheduled Task from hooks.yaml, then recompile',
  flags: [
    AGENT_FLAG,
    ...EDIT_FLAGS,
  ],
}

export function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  return removeDefinition(spec, 'task', argv, io)
}
