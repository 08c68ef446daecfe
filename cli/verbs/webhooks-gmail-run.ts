// `hookgate webhooks gmail run`: the Gmail helper's receiver (gmail/run.ts) until SIGTERM or SIGINT:
// Pub/Sub pushes in, the new mail fetched and posted to /hooks/gmail, the watch renewed.
import { ExitCode } from '../exit-codes.js'
import { GMAIL_FLAGS, processIO, readCommandArgs, type CommandIO, type CommandSpec } from '../flags.js'
import { logLine } from '../log-output.js'

export const spec: CommandSpec = {
  name: 'webhooks gmail run',
  args: '',
  summary: 'run the Gmail helper: receive Pub/Sub pushes, fetch the new mail, post it to /hooks/gmail, renew the watch',
  flags: [
    ...GMAIL_FLAGS,
  ],
  notes: [
    'the receiver listens on hooks.gmail.receiver (default 127.0.0.1:8788, path /gmail-pubsub) and answers GET /healthz;',
    'a push is acknowledged only after the hook accepted its messages; SIGTERM stops it',
  ],
}

export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const v = parsed.values as { config: string; state?: string }
  const { helperLog, startHelper } = await import('../../gmail/run.js')
  const { createLogger } = await import('../../runtime/observe/log.js')
  // a helper that cannot start says why in a log line, as it logs everything else
  let helper
  try {
    const { HelperConfigError, loadHelperConfig } = await import('../../gmail/config.js')
    const config = loadHelperConfig(v.config, v.state)
    if (!config.configured) throw new HelperConfigError(`${v.config} has no hooks.gmail: run \`hookgate webhooks gmail setup\` first`)
    helper = await startHelper({ config, write: (line) => io.stdout(line + '\n') })
  } catch (err) {
    io.stderr(logLine('error', `hookgate ${spec.name}: cannot start: ${(err as Error).message}`))
    return ExitCode.refused
  }
  await new Promise<void>((resolve) => {
    const stop = () => { process.off('SIGTERM', stop); process.off('SIGINT', stop); resolve() }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
  })
  await helper.close()
  helperLog(createLogger((line) => io.stdout(line + '\n')))('stopped')
  return ExitCode.ok
}
