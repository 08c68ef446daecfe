// `hookgate webhooks gmail run`: the Gmail helper's receiver (gmail/run.ts) until SIGTERM or SIGINT:
// Pub/Sub pushes in, the new mail fetched and posted to /hooks/gmail, the watch renewed.
import { ExitCode } from '../exit-codes.js'
import { GMAIL_FLAGS, processIO, readCommandArgs, sayingRefusals, type CommandIO, type CommandSpec } from '../flags.js'

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
  return sayingRefusals(spec, io, async () => {
    const { HelperConfigError, loadHelperConfig } = await import('../../gmail/config.js')
    const { helperLog, startHelper } = await import('../../gmail/run.js')
    const { createLogger } = await import('../../runtime/observe/log.js')
    const config = loadHelperConfig(v.config, v.state)
    if (!config.configured) throw new HelperConfigError(`${v.config} has no hooks.gmail: run \`hookgate webhooks gmail setup\` first`)
    const helper = await startHelper({ config, write: (line) => io.stdout(line + '\n') })
    await new Promise<void>((resolve) => {
      const stop = () => { process.off('SIGTERM', stop); process.off('SIGINT', stop); resolve() }
      process.on('SIGTERM', stop)
      process.on('SIGINT', stop)
    })
    await helper.close()
    helperLog(createLogger((line) => io.stdout(line + '\n')))('stopped')
    return ExitCode.ok
  })
}
