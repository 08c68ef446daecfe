// `hookgate webhooks gmail setup`: its flags read and their shapes checked here; the steps (Pub/Sub
// topic, grant, subscription, the watch, hooks.gmail written through the config-editing library)
// are the Gmail helper's (gmail/setup.ts). Exit 0 done (or planned), 1 refused by Google or by the
// config, 2 usage error.
import { ExitCode } from '../exit-codes.js'
import { GMAIL_FLAGS, processIO, readCommandArgs, sayingRefusals, type CommandIO, type CommandSpec } from '../flags.js'
import type { SetupFlags } from '../../gmail/setup.js'

export const spec: CommandSpec = {
  name: 'webhooks gmail setup',
  args: '',
  summary: 'set up Gmail push: the Pub/Sub topic, its publisher grant, the push subscription, the watch, and hooks.gmail',
  flags: [
    { name: 'account', value: 'EMAIL', description: 'the mailbox to watch (default: hooks.gmail.account; required the first time)' },
    { name: 'project', value: 'ID', description: 'the Google Cloud project for the topic (default: hooks.gmail.project, else the Pub/Sub key\'s project)' },
    { name: 'topic', value: 'NAME', description: 'the Pub/Sub topic (default: hooks.gmail.topic, else hookgate-gmail)' },
    { name: 'subscription', value: 'NAME', description: 'the push subscription (default: hooks.gmail.subscription, else hookgate-gmail-push)' },
    { name: 'label', value: 'LABEL', multiple: true, description: 'watch only mail with this label (repeatable; default: hooks.gmail.labels, else INBOX)' },
    { name: 'push-endpoint', value: 'URL', description: 'the public https URL Pub/Sub pushes to, reaching the receiver (required the first time)' },
    { name: 'hook-url', value: 'URL', description: 'where the helper posts mail (default: this hookgate\'s /hooks/gmail)' },
    { name: 'receiver-host', value: 'HOST', description: 'the receiver\'s bind address (default 127.0.0.1)' },
    { name: 'receiver-port', value: 'PORT', description: 'the receiver\'s port (default 8788)' },
    { name: 'receiver-path', value: 'PATH', description: 'the receiver\'s path (default /gmail-pubsub)' },
    { name: 'include-body', value: 'yes|no', description: 'send each message\'s body as text, not only its snippet (default yes)' },
    { name: 'max-bytes', value: 'N', description: 'the most body bytes sent per message (default 20000)' },
    { name: 'renew-every-minutes', value: 'N', description: 'how often run renews the watch (default 720; Gmail\'s watch lasts 7 days)' },
    { name: 'pubsub-key', value: 'FILE', description: 'a service-account key file that may administer Pub/Sub in the project (written to hooks.gmail as a { file } reference)' },
    { name: 'oauth-client', value: 'FILE', description: 'the OAuth client file whose refresh token `login` stored (reads the mailbox)' },
    { name: 'gmail-key', value: 'FILE', description: 'instead of --oauth-client: a service-account key with domain-wide delegation' },
    { name: 'subject', value: 'EMAIL', description: 'with --gmail-key: the mailbox it acts as (default: --account)' },
    { name: 'oidc-service-account', value: 'EMAIL', description: 'have Pub/Sub sign each push as this service account, and run check it' },
    { name: 'oidc-audience', value: 'URL', description: 'the audience of those tokens (default: --push-endpoint)' },
    ...GMAIL_FLAGS,
    { name: 'out', value: 'DIR', default: 'dist', description: 'where the recompiled bundle is written when hooks.yaml changes (the folder `hookgate serve --bundle` reads)' },
    { name: 'dry-run', description: 'print the plan and call nothing, write nothing' },
  ],
  notes: [
    'each step is checked first and left alone when it is already right, so running setup again changes nothing;',
    'exit 0 done (or planned), 1 refused by Google or by the config, 2 usage error',
  ],
}

export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const v = parsed.values as SetupFlags
  const usage = checkFlags(v)
  if (usage) {
    io.stderr(`hookgate webhooks gmail setup: ${usage}\n`)
    return ExitCode.usage
  }
  return sayingRefusals(spec, io, async () => {
    const { setup } = await import('../../gmail/setup.js')
    return await setup(v, io) ? ExitCode.ok : ExitCode.refused
  })
}

/** Usage problems the parser cannot see: values of the wrong shape. */
function checkFlags(v: SetupFlags): string | undefined {
  const int = (name: string, min: number, max: number) => {
    const raw = v[name]
    if (raw === undefined) return undefined
    const n = Number(raw)
    return Number.isInteger(n) && n >= min && n <= max ? undefined : `--${name} takes a whole number from ${min} to ${max}`
  }
  if (v['include-body'] !== undefined && v['include-body'] !== 'yes' && v['include-body'] !== 'no') return '--include-body takes yes or no'
  for (const name of ['push-endpoint', 'hook-url', 'oidc-audience']) {
    const raw = v[name]
    if (typeof raw === 'string' && !/^https?:\/\/[^\s]+$/.test(raw)) return `--${name} takes an http(s) URL`
  }
  if (typeof v['receiver-path'] === 'string' && !v['receiver-path'].startsWith('/')) return '--receiver-path starts with /'
  if (v['gmail-key'] !== undefined && v['oauth-client'] !== undefined) return 'give --oauth-client or --gmail-key, not both'
  return int('receiver-port', 0, 65535) ?? int('max-bytes', 1, 64 * 1024 * 1024) ?? int('renew-every-minutes', 1, 7 * 24 * 60)
}
