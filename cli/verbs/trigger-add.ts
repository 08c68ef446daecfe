// `hookgate trigger add`: a Webhook Trigger added under an agent in hooks.yaml (or with --replace changed), compiled first,
// then saved with its bundle (cli/definitions.ts); prints its endpoint URL and a curl line.
import { AGENT_FLAG, EDIT_FLAGS, processIO, type CommandIO, type CommandSpec } from '../flags.js'
import { addDefinition } from '../definitions.js'

export const spec: CommandSpec = {
  name: 'trigger add',
  args: '',
  summary: 'add (or with --replace, change) a Webhook Trigger under an agent in hooks.yaml, then recompile',
  flags: [
    AGENT_FLAG,
    { name: 'name', value: 'NAME', required: true, description: 'Name: the human label; the Trigger\'s id is made from it' },
    { name: 'path', value: 'PATH', required: true, description: 'Path: the endpoint under the base path, e.g. deploys' },
    { name: 'target', value: 'agent|workflow|wake', required: true, description: 'Run target: Agent prompt, Workflow / graph, or Heartbeat wake' },
    { name: 'timing', value: 'now|next-heartbeat', description: 'Run timing of a wake (default now)' },
    { name: 'workflow', value: 'ID', description: 'Workflow target: a saved workflow (target workflow)' },
    { name: 'delivery', value: 'internal|deliver', description: 'Delivery of an agent\'s reply (default internal)' },
    { name: 'prompt', value: 'TEMPLATE', description: 'Prompt template, e.g. "Deploy {{payload.service}} finished"' },
    { name: 'channel', value: 'ID', description: 'Reply channel (delivery deliver; default last)' },
    { name: 'to', value: 'TARGET', description: 'Reply target within the channel' },
    { name: 'timeout', value: 'SECONDS', description: 'Timeout of the run' },
    { name: 'notify', value: 'silent|done|state', description: 'Notify policy of the run history (default done)' },
    { name: 'disabled', description: 'write it disabled: kept in the file, not served' },
    { name: 'replace', description: 'replace the Trigger of that name instead of refusing' },
    ...EDIT_FLAGS,
  ],
  notes: [
    'the edit is compiled before anything is written: a config error prints file:line:col findings and changes nothing (exit 1);',
    'hooks.enabled is set to true, and a hook token is generated into the state directory when hooks.token is missing;',
    'prints the endpoint URL and a curl line. Exit 0 saved, 1 refused (config error, name taken), 2 usage error',
    'or a file that could not be written (hooks.yaml and the bundle are then both left as they were)',
  ],
}

export function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  return addDefinition(spec, 'trigger', argv, io)
}
