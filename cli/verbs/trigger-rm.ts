// `hookgate trigger rm NAME`: a Webhook Trigger removed from hooks.yaml, then recompiled (cli/definitions.ts).
import { AGENT_FLAG, EDIT_FLAGS, processIO, type CommandIO, type CommandSpec } from '../flags.js'
import { removeDefinition } from '../definitions.js'

export const spec: CommandSpec = {
  name: 'trigger rm',
  args: 'NAME',
  summary: 'remove a Webhook Trigger from hooks.yaml, then recompile',
  flags: [
    AGENT_FLAG,
    ...EDIT_FLAGS,
  ],
}

export function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  return removeDefinition(spec, 'trigger', argv, io)
}
