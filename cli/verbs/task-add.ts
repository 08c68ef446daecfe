// `hookgate task add`: a scheduled Task added under an agent in hooks.yaml (or with --replace changed), compiled first,
// then saved with its bundle (cli/definitions.ts); prints its next five firings.
import { AGENT_FLAG, EDIT_FLAGS, processIO, type CommandIO, type CommandSpec } from '../flags.js'
import { addDefinition } from '../definitions.js'

export const spec: CommandSpec = {
  name: 'task add',
  args: '',
  summary: 'add (or with --replace, change) a scheduled Task under an agent in hooks.yaml, then recompile',
  flags: [
    AGENT_FLAG,
    { name: 'name', value: 'NAME', required: true, description: 'the Task\'s name; its id is made from it' },
    { name: 'schedule', value: 'CRON', description: 'a five-field cron expression or @hourly, @daily, @weekly, @monthly, @yearly' },
    { name: 'every', value: 'INTERVAL', description: 'a fixed interval instead of --schedule, e.g. 90s, 15m, 2h, 1d' },
    { name: 'timezone', value: 'ZONE', description: 'the IANA time zone the schedule is read in (default UTC)' },
    { name: 'catch-up', value: 'once|skip', description: 'a slot missed while the service was down: run it once at start, or skip it (default once)' },
    { name: 'target', value: 'agent|workflow|wake', required: true, description: 'what each firing runs' },
    { name: 'workflow', value: 'ID', description: 'a saved workflow (target workflow)' },
    { name: 'prompt', value: 'TEXT', description: 'the agent prompt or wake text' },
    { name: 'timeout', value: 'SECONDS', description: 'Timeout of each run' },
    { name: 'notify', value: 'silent|done|state', description: 'Notify policy of the run history (default done)' },
    { name: 'disabled', description: 'write it disabled: kept in the file, not scheduled' },
    { name: 'replace', description: 'replace the Task of that name instead of refusing' },
    ...EDIT_FLAGS,
  ],
  notes: [
    'prints the next five firing times. Exit 0 saved, 1 refused (config error, name taken), 2 usage error',
    'or a file that could not be written (hooks.yaml and the bundle are then both left as they were)',
  ],
}

export function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  return addDefinition(spec, 'task', argv, io)
}
